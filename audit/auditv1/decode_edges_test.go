package auditv1

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeStringsAtWordEdges: the scanners take a string whose first special byte is its closing
// quote (and a member name with the ':' right after it) in whole eight-byte words, and anything
// else (escapes, control characters, bytes that are not ASCII, whitespace around the ':', a
// string that ends in the last few bytes of the input) the long way. Random event lists whose
// strings and names have every length around those words, and every such byte at every place,
// decode as encoding/json decodes them, with the body Layouts a scan finds; every truncation of
// them is an error for both.
func TestDecodeStringsAtWordEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	pieces := []string{"a", "b", "Z", "0", " ", "/", ".", "é", `\"`, `\\`, `\u0001`, `\n`, "\xff", "😀"}
	str := func() string {
		var b strings.Builder
		n := rng.IntN(20)
		for range n {
			if rng.IntN(4) == 0 {
				b.WriteString(pieces[rng.IntN(len(pieces))])
			} else {
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		return b.String()
	}
	ws := func() string { return [...]string{"", "", "", " ", "\n\t"}[rng.IntN(5)] }
	var value func(depth int) string
	object := func(depth int) string {
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			// An index keeps the names of an object apart (encoding/json merges repeats).
			fmt.Fprintf(&b, `"%s%d"%s:%s%s`, str(), i, ws(), ws(), value(depth+1))
		}
		b.WriteString(ws() + "}")
		return b.String()
	}
	value = func(depth int) string {
		switch k := rng.IntN(6); {
		case k == 0 && depth < 4:
			return object(depth)
		case k == 1 && depth < 4:
			return "[" + value(depth+1) + "," + ws() + `"` + str() + `"]`
		case k == 2:
			return "-12.5e3"
		case k == 3:
			return "true"
		default:
			return `"` + str() + `"`
		}
	}
	for round := range 400 {
		var items []string
		for i := range 1 + rng.IntN(3) {
			annotations := make([]string, 0, 3)
			for j := range rng.IntN(4) {
				annotations = append(annotations, fmt.Sprintf(`"%s%d"%s:%s"%s"`, str(), j, ws(), ws(), str()))
			}
			items = append(items, fmt.Sprintf(`{"auditID"%s:%s"%s%d","verb":"%s","objectRef":{"resource":"pods","name":"%s"},`+
				`"requestObject":%s,"responseObject":{"kind":"Pod","metadata":{"name":"%s","labels":{"%s":"%s"}},"spec":%s},`+
				`"annotations":{%s}}`,
				ws(), ws(), str(), i, str(), str(), value(0), str(), str(), str(), object(1), strings.Join(annotations, ","+ws())))
		}
		data := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)

		var ref struct {
			Items []*Event `json:"items"`
		}
		require.NoError(t, json.Unmarshal(data, &ref), "round %d: %s", round, data)
		events, err := DecodeEventList(data)
		require.NoError(t, err, "round %d: %s", round, data)
		require.Len(t, events, len(ref.Items))
		for i := range events {
			assertSameEvent(t, ref.Items[i], events[i])
			assertResponseMeta(t, events[i])
		}
		for range 5 {
			cut := data[:rng.IntN(len(data))]
			_, err := DecodeEventList(cut)
			require.Error(t, err, "round %d, cut at %d: %s", round, len(cut), cut)
		}
	}
}
