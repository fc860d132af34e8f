package objdiff

import (
	"strings"
	"testing"
)

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
