package jsonscan

import (
	"encoding/binary"
	"testing"
)

// FuzzScan compares every function with its byte-at-a-time reference from the first offsets of
// the input, and the masks on each eight bytes of it (go test ./internal/jsonscan -fuzz FuzzScan;
// the seeds are in testdata/fuzz/FuzzScan and below).
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`"abcdefgh\"ijklmnop"`,
		`"abcdefg\u00e9hijklmnopq", "x"`,
		"\"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\\\"\"",
		"\"abcdefghijklmno\x01\"",
		`"abc\u12`,
		`  "a\\"  `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b) && i <= 24; i++ {
			checkAgainstReference(t, b, i)
		}
		for k := 0; k+8 <= len(b); k++ {
			w := binary.LittleEndian.Uint64(b[k:])
			checkMask(t, "NotPlain", NotPlain, refPlain, w)
			checkMask(t, "NotSafe", NotSafe, refSafe, w)
		}
	})
}
