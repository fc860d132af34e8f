package diff

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stringEndReference is the byte-at-a-time stringEnd that the word-at-a-time one replaced.
func stringEndReference(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// TestStringEndMatchesReference compares stringEnd with the byte loop on strings with quotes and
// escapes at every offset of a word, and on random bytes (unterminated strings included).
func TestStringEndMatchesReference(t *testing.T) {
	var inputs [][]byte
	for n := range 20 {
		for _, tail := range []string{`"`, `\""`, `\\"`, `\`, `\"`, `é"`, "", `"x"`} {
			inputs = append(inputs, []byte(`"`+strings.Repeat("a", n)+tail+`,"b"`), []byte(`"`+strings.Repeat("a", n)+tail))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', '"', '\\', 0x80, ' ', 0}
	for range 20000 {
		b := make([]byte, 1+r.IntN(40))
		b[0] = '"'
		for k := 1; k < len(b); k++ {
			b[k] = alphabet[r.IntN(len(alphabet))]
		}
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		want, ok := stringEndReference(b, 0)
		got, err := stringEnd(b, 0)
		require.Equal(t, ok, err == nil, "%q", b)
		require.Equal(t, want, got, "%q", b)
	}
}

// BenchmarkStringEnd scans a 2 KB string value (go test ./diff -run '^$' -bench StringEnd).
func BenchmarkStringEnd(b *testing.B) {
	s := []byte(`"` + strings.Repeat(`abcdefghij`, 100) + `\"` + strings.Repeat(`abcdefghij`, 100) + `"`)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := stringEnd(s, 0); err != nil {
			b.Fatal(err)
		}
	}
}
