package jsonscan

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkAgainstReference compares every function at (b, i) with its byte-at-a-time reference, and
// Scan's verdict with encoding/json's.
func checkAgainstReference(t *testing.T, b []byte, i int) {
	t.Helper()
	require.Equal(t, refRun(b, i, refPlain), PlainRun(b, i), "PlainRun(%q, %d)", b, i)
	require.Equal(t, refRun(b, i, refSafe), SafeRun(b, i), "SafeRun(%q, %d)", b, i)
	require.Equal(t, refQuickEnd(b, i, refPlain), PlainEnd(b, i), "PlainEnd(%q, %d)", b, i)
	require.Equal(t, refQuickEnd(b, i, refSafe), SafeEnd(b, i), "SafeEnd(%q, %d)", b, i)
	require.Equal(t, refEnd(b, i), End(b, i), "End(%q, %d)", b, i)
	require.Equal(t, refSkipSpace(b, i), SkipSpace(b, i), "SkipSpace(%q, %d)", b, i)

	wantEnd, wantFlags, wantFault := refScan(b, i)
	end, flags, fault := Scan(b, i)
	require.Equal(t, [3]any{wantEnd, wantFlags, wantFault}, [3]any{end, flags, fault}, "Scan(%q, %d)", b, i)
	end, fault = Check(b, i)
	require.Equal(t, [2]any{wantEnd, wantFault}, [2]any{end, fault}, "Check(%q, %d)", b, i)
	if wantFault == OK {
		// A string Scan finds valid is one for encoding/json (which does not check UTF-8 either),
		// and ends where End says.
		require.True(t, json.Valid([]byte(`"`+string(b[i:wantEnd+1]))), "Scan(%q, %d)", b, i)
		require.Equal(t, wantEnd, End(b, i), "End(%q, %d)", b, i)
	}
	if json.Valid([]byte(`"` + string(b[i:]))) {
		require.Equal(t, OK, wantFault, "Scan(%q, %d): encoding/json takes it", b, i)
		require.Equal(t, len(b), refSkipSpace(b, wantEnd+1), "Scan(%q, %d): encoding/json takes it", b, i)
	}
}

// checkMask checks that mask flags a word holding a byte outside the class in, that it flags no
// word of bytes in it only, and that its lowest flag is on the first byte outside it.
func checkMask(t *testing.T, name string, mask func(uint64) uint64, in func(byte) bool, w uint64) {
	t.Helper()
	first := -1
	for k := range 8 {
		if !in(byte(w >> (8 * k))) {
			first = k
			break
		}
	}
	m := mask(w)
	if first < 0 {
		require.Zero(t, m, "%s(%#x)", name, w)
		return
	}
	require.NotZero(t, m, "%s(%#x)", name, w)
	require.Equal(t, first, bits.TrailingZeros64(m)>>3, "%s(%#x): lowest flag", name, w)
}

// TestMasks: every byte value at every place of a word of plain bytes, the same with a '"' further
// on, and random words of mostly plain bytes; and the tables against the references.
func TestMasks(t *testing.T) {
	for c := range 256 {
		require.Equal(t, refPlain(byte(c)), IsPlain(byte(c)), "IsPlain(%#x)", c)
		require.Equal(t, refSafe(byte(c)), IsSafe(byte(c)), "IsSafe(%#x)", c)
		require.Equal(t, refSpace(byte(c)), IsSpace(byte(c)), "IsSpace(%#x)", c)
		require.Equal(t, refHTMLPlain(byte(c)), htmlPlain[c], "htmlPlain[%#x]", c)
	}
	check := func(w uint64) {
		checkMask(t, "NotPlain", NotPlain, refPlain, w)
		checkMask(t, "NotSafe", NotSafe, refSafe, w)
		checkMask(t, "NotHTMLPlain", NotHTMLPlain, refHTMLPlain, w)
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
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w uint64
		for k := range 8 {
			c := byte(rng.UintN(256))
			if rng.UintN(8) != 0 {
				c = byte('a' + rng.UintN(26))
			}
			w |= uint64(c) << (8 * k)
		}
		check(w)
	}
}

// TestScan: the results of each function on strings (the text after the opening quote) with
// escapes, bytes of 0x80 and above, control characters, on both sides of a word's end, and cut
// short.
func TestScan(t *testing.T) {
	const word = "abcdefgh"
	for _, tt := range []struct {
		name  string
		in    string
		end   int // Scan's and Check's
		flags Flags
		fault Fault
		plain int // PlainEnd
		safe  int // SafeEnd
		any   int // End
	}{
		{name: "empty string", in: `"`, end: 0, plain: -1, safe: -1},
		{name: "short", in: `abc",`, end: 3, plain: -1, safe: -1, any: 3},
		{name: "quote in the second word", in: word + `ij",` + word, end: 10, plain: 10, safe: 10, any: 10},
		{name: "quote last in a word", in: "abcdefg\"", end: 7, plain: 7, safe: 7, any: 7},
		{name: "quote first after a word", in: word + `"`, end: 8, plain: -1, safe: -1, any: 8},
		{name: "quote first after a word, more follows", in: word + `"` + word, end: 8, plain: 8, safe: 8, any: 8},
		{name: "escaped quote", in: `a\"b"`, end: 4, flags: Escaped, plain: -1, safe: -1, any: 4},
		{name: "escaped backslash before the quote", in: `ab\\"` + word, end: 4, flags: Escaped, plain: -1, safe: -1, any: 4},
		{name: "escape across a word's end", in: "abcdefg\\\"" + word + `"`, end: 17, flags: Escaped, plain: -1, safe: -1, any: 17},
		{name: "unicode escape", in: `\u00e9x"` + word, end: 7, flags: Escaped, plain: -1, safe: -1, any: 7},
		{name: "unicode escape across a word's end", in: `abcdef\u00E9"` + word, end: 12, flags: Escaped, plain: -1, safe: -1, any: 12},
		{name: "all escapes", in: `\"\\\/\b\f\n\r\t\uABCD"`, end: 22, flags: Escaped, plain: -1, safe: -1, any: 22},
		{name: "not ASCII", in: `é"` + word, end: 2, flags: NonASCII, plain: -1, safe: 2, any: 2},
		{name: "not ASCII in the second word", in: word + "é" + word + `"` + word, end: 18, flags: NonASCII, plain: -1, safe: 18, any: 18},
		{name: "invalid UTF-8 is not checked", in: "\xff\xfe\x80\"" + word, end: 3, flags: NonASCII, plain: -1, safe: 3, any: 3},
		{name: "escape and not ASCII", in: `é\n"`, end: 4, flags: Escaped | NonASCII, plain: -1, safe: -1, any: 4},
		{name: "control character", in: "ab\x01cd\"" + word, end: 2, fault: Control, plain: -1, safe: -1, any: 5},
		{name: "newline", in: word + "\n\"" + word, end: 8, fault: Control, plain: -1, safe: -1, any: 9},
		{name: "tab after not ASCII", in: "é\t\"", end: 2, flags: NonASCII, fault: Control, plain: -1, safe: -1, any: 3},
		{name: "bad escape", in: `a\x"`, end: 2, flags: Escaped, fault: BadEscape, plain: -1, safe: -1, any: 3},
		{name: "bad unicode escape", in: `\u00g9"`, end: 4, flags: Escaped, fault: BadUnicode, plain: -1, safe: -1, any: 6},
		{name: "unterminated", in: `abc`, end: 3, fault: Unterminated, plain: -1, safe: -1, any: -1},
		{name: "unterminated after words", in: word + word, end: 16, fault: Unterminated, plain: -1, safe: -1, any: -1},
		{name: "unterminated, the quote escaped", in: `abc\"`, end: 5, flags: Escaped, fault: Unterminated, plain: -1, safe: -1, any: -1},
		{name: "unterminated escape", in: `abc\`, end: 4, flags: Escaped, fault: BadEscape, plain: -1, safe: -1, any: -1},
		{name: "unterminated unicode escape", in: `abc\u00`, end: 7, flags: Escaped, fault: BadUnicode, plain: -1, safe: -1, any: -1},
		{name: "nothing", in: ``, end: 0, fault: Unterminated, plain: -1, safe: -1, any: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.in)
			end, flags, fault := Scan(b, 0)
			require.Equal(t, tt.end, end, "Scan end")
			require.Equal(t, tt.flags, flags, "Scan flags")
			require.Equal(t, tt.fault, fault, "Scan fault: %v", fault)
			end, fault = Check(b, 0)
			require.Equal(t, tt.end, end, "Check end")
			require.Equal(t, tt.fault, fault, "Check fault: %v", fault)
			require.Equal(t, tt.plain, PlainEnd(b, 0), "PlainEnd")
			require.Equal(t, tt.safe, SafeEnd(b, 0), "SafeEnd")
			require.Equal(t, tt.any, End(b, 0), "End")
			// The same string further into the input (after its opening quote), at every
			// alignment.
			for pad := 1; pad <= 8; pad++ {
				p := []byte(strings.Repeat(" ", pad-1) + `"` + tt.in)
				shift := func(i int) int {
					if i < 0 {
						return i
					}
					return i + pad
				}
				end, _, fault := Scan(p, pad)
				require.Equal(t, [2]any{shift(tt.end), tt.fault}, [2]any{end, fault}, "Scan at %d", pad)
				require.Equal(t, shift(tt.any), End(p, pad), "End at %d", pad)
				checkAgainstReference(t, p, pad)
			}
		})
	}
}

// TestScanWordEdges: strings of every length around two words with a special sequence at every
// place and every ending, against the references.
func TestScanWordEdges(t *testing.T) {
	specials := []string{"", `\"`, `\\`, `\/`, `\u00e9`, `\u12`, `\x`, `\`, "é", "\xff", "😀", "\x01", "\x7f", `"`, " "}
	tails := []string{`"`, `",`, `","bcdefghijklmnop"`, ``, `\`, `\u`, "\x00\""}
	for n := range 20 {
		for _, special := range specials {
			for at := 0; at <= n; at++ {
				for _, tail := range tails {
					s := strings.Repeat("a", at) + special + strings.Repeat("b", n-at) + tail
					checkAgainstReference(t, []byte(s), 0)
					checkAgainstReference(t, []byte(`"`+s), 1)
				}
			}
		}
	}
}

// TestScanLong: strings longer than End's first words (it takes the rest with bytes.IndexByte),
// with runs of backslashes before quotes, escaped and not, at every place after them.
func TestScanLong(t *testing.T) {
	for n := 24; n <= 56; n++ {
		for k := range 6 {
			for _, tail := range []string{`"`, `","b"`, `x"`, `\"`, ``, "\x01\"", `\\"` + strings.Repeat("c", 40) + `"`} {
				s := strings.Repeat("a", n) + strings.Repeat(`\`, k) + `"` + tail
				checkAgainstReference(t, []byte(s), 0)
				checkAgainstReference(t, []byte(`"`+s), 1)
			}
		}
	}
}

func TestSkipSpace(t *testing.T) {
	for _, tt := range []struct {
		in   string
		i    int
		want int
	}{
		{"", 0, 0},
		{" ", 0, 1},
		{"x", 0, 0},
		{" \t\n\rx ", 0, 4},
		{"a  b", 1, 3},
		{"\v x", 0, 0},    // vertical tab is not JSON whitespace
		{"\x00 ", 0, 0},   // nor is NUL, below the space
		{"\u00a0x", 0, 0}, // nor a no-break space
		{"   ", 3, 3},     // at the end
		{strings.Repeat(" ", 20) + "}", 0, 20},
	} {
		require.Equal(t, tt.want, SkipSpace([]byte(tt.in), tt.i), "SkipSpace(%q, %d)", tt.in, tt.i)
	}
}

func TestFaultString(t *testing.T) {
	for f := OK; f <= BadUnicode+1; f++ {
		require.NotEmpty(t, f.String())
	}
	require.Equal(t, `invalid \u escape in string`, BadUnicode.String())
}

// TestHTMLPlain: HTMLPlain agrees with encoding/json (a string of ASCII it writes as it is; bytes
// of 0x80 and above are left to it even when they are valid UTF-8 it would copy) on strings of
// every length up to three words with each byte value at each place, and on random strings.
func TestHTMLPlain(t *testing.T) {
	ref := func(s string) bool {
		for i := range len(s) {
			if s[i] >= 0x80 {
				return false
			}
		}
		out, err := json.Marshal(s)
		return err == nil && string(out) == `"`+s+`"`
	}
	base := "abcdefghijklmnopqrstuvwx"
	for n := range len(base) + 1 {
		require.True(t, HTMLPlain(base[:n]))
		for pos := range n {
			for c := range 256 {
				b := []byte(base[:n])
				b[pos] = byte(c)
				require.Equal(t, ref(string(b)), HTMLPlain(string(b)), "%q", b)
			}
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		b := make([]byte, rng.UintN(40))
		for k := range b {
			b[k] = byte(' ' + rng.UintN(95))
			if rng.UintN(64) == 0 {
				b[k] = byte(rng.UintN(256))
			}
		}
		require.Equal(t, ref(string(b)), HTMLPlain(string(b)), "%q", b)
	}
}
