package linker

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotPlainMask: notPlain flags a word that holds a byte plainByte does not mark, and its
// lowest flag is on the first such byte (rawString jumps there), for every byte value at every
// position, after another such byte, and for random words.
func TestNotPlainMask(t *testing.T) {
	check := func(w uint64) {
		first := -1
		for i := range 8 {
			if !plainByte[byte(w>>(8*i))] {
				first = i
				break
			}
		}
		m := notPlain(w)
		if first < 0 {
			require.Zero(t, m, "%#x", w)
			return
		}
		require.NotZero(t, m, "%#x", w)
		require.Equal(t, first, bits.TrailingZeros64(m)>>3, "%#x: lowest flag", w)
	}
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			check(binary.LittleEndian.Uint64(w))
			w[7-pos] = '"'
			check(binary.LittleEndian.Uint64(w))
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var w uint64
		for i := range 8 {
			c := byte(rng.UintN(256))
			if rng.UintN(6) != 0 {
				c = byte('a' + rng.UintN(26))
			}
			w |= uint64(c) << (8 * i)
		}
		check(w)
	}
}

// TestDecodeMetadataStringsAtWordEdges: names and annotation values of every length around an
// eight-byte word, with an escape, a character that is not ASCII or a control character at every
// place, read as encoding/json reads them (or refused where it refuses them).
func TestDecodeMetadataStringsAtWordEdges(t *testing.T) {
	for n := range 20 {
		for _, special := range []string{"", `\"`, `\\`, `\u00e9`, "é", "😀", "\x01"} {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + special + strings.Repeat("b", n-at)
				body := `{"kind":"Pod","metadata":{"name":"` + s + `","annotations":{"` + AnnotationParentLink + `":"` + s + `"}}}`
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
				require.Equal(t, want.Metadata.Annotations[AnnotationParentLink], *got.parentLink, body)
			}
		}
	}
}
