package linker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeMetadataStringsAtWordEdges: names and annotation values of every length around an
// eight-byte word, with an escape, a character that is not ASCII or a control character at every
// place, read as encoding/json reads them (or refused where it refuses them).
func TestDecodeMetadataStringsAtWordEdges(t *testing.T) {
	for n := range 20 {
		for _, special := range []string{"", `\"`, `\\`, `\u00e9`, "é", "😀", "\x01"} {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + special + strings.Repeat("b", n-at)
				body := `{"kind":"Pod","metadata":{"name":"` + s + `","annotations":{"` + annotationParentLink + `":"` + s + `"}}}`
				var want struct {
					Metadata struct {
						Name        string            `json:"name"`
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				}
				wantErr := json.Unmarshal([]byte(body), &want)
				got, err := decodeMetadata([]byte(body), wantAnnotations)
				if wantErr != nil {
					require.Error(t, err, body)
					continue
				}
				require.NoError(t, err, body)
				require.Equal(t, want.Metadata.Name, got.name, body)
				require.NotNil(t, got.parentLink, body)
				require.Equal(t, want.Metadata.Annotations[annotationParentLink], *got.parentLink, body)
			}
		}
	}
}
