// Package jsonscan finds where the strings of JSON text end, and skips its whitespace, testing
// eight bytes of a string at once (SWAR: a 64-bit word read little endian, one flag in the high
// bit of each byte). It is the one copy of these masks for the hand-written readers of the
// project: the audit decoder, the linkers' metadata reader, the diff scanner and the webhook
// tap. It decodes nothing.
//
// The string functions take i, the index just after a string's opening quote, and return the
// index of its closing quote (the string's content is b[i:end]). They never read outside b, and
// return -1 or a Fault for input that ends inside the string.
//
// Two byte classes matter:
//
//   - plain: printable ASCII but '"' and '\'. A reader copies these as they are, with no look.
//   - safe: any byte but '"', '\' and control characters (below 0x20). A valid string holds these
//     as they are; a byte of 0x80 and above is part of UTF-8 that only who decodes the string
//     needs to check.
//
// The masks NotPlain and NotSafe flag the bytes of a word outside each class. Their lowest flag is
// exact (a scanner jumps to it with bits.TrailingZeros64); the flags above it may be spurious.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

const (
	lo = 0x0101010101010101 // one in every byte
	hi = 0x8080808080808080 // the high bit of every byte
)

// NotPlain flags (high bit of the byte) the bytes of w, eight bytes read little endian, that are
// not plain: '"', '\', a control character or a byte of 0x80 and above. It ORs the has-zero-byte
// tests of w xor '"' and w xor '\' and the has-byte-less-than-0x20 test of w, from "Bit Twiddling
// Hacks", with w itself (whose high bits flag the bytes above ASCII). A subtraction borrows into
// the byte above only out of a byte that is flagged, so no byte below the first flagged one is.
func NotPlain(w uint64) uint64 {
	q := w ^ (lo * '"')
	b := w ^ (lo * '\\')
	return ((q - lo) | (b - lo) | (w - lo*0x20) | w) & hi
}

// NotSafe flags (high bit of the byte) the bytes of w, eight bytes read little endian, that are not
// safe: '"', '\' or a control character. These are NotPlain's tests without w's high bits, which
// also clear the flags the subtractions leave on bytes of 0x80 and above.
func NotSafe(w uint64) uint64 {
	q := w ^ (lo * '"')
	b := w ^ (lo * '\\')
	return ((q - lo) | (b - lo) | (w - lo*0x20)) &^ w & hi
}

// NotHTMLPlain flags the bytes of w, eight bytes read little endian, that encoding/json does not
// copy as they are into a string it writes: those NotPlain flags, and '<', '>' and '&', which it
// escapes for HTML. Like NotPlain's, its lowest flag is exact and it is zero only when no
// byte is flagged: a subtraction borrows only out of a flagged byte, and the flags it leaves on
// bytes of 0x80 and above are w's own.
func NotHTMLPlain(w uint64) uint64 {
	q := w ^ (lo * '"')
	b := w ^ (lo * '\\')
	lt := w ^ (lo * '<')
	gt := w ^ (lo * '>')
	amp := w ^ (lo * '&')
	return ((q - lo) | (b - lo) | (lt - lo) | (gt - lo) | (amp - lo) | (w - lo*0x20) | w) & hi
}

// HTMLPlain reports whether encoding/json writes s as it is between quotes: every byte ASCII from
// 0x20 on but '"', '\', '<', '>' and '&'. Eight bytes at a time.
func HTMLPlain(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if NotHTMLPlain(w) != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if !htmlPlain[s[i]] {
			return false
		}
	}
	return true
}

// plain and safe are the byte classes as tables, for the last few bytes of an input.
var (
	plain     = class(0x80)
	safe      = class(0x100)
	htmlPlain = func() [256]bool {
		t := class(0x80)
		t['<'], t['>'], t['&'] = false, false, false
		return t
	}()
)

// class marks the bytes from 0x20 up to (not including) end, but '"' and '\'.
func class(end int) (t [256]bool) {
	for c := 0x20; c < end; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}

// IsPlain reports whether c is plain: printable ASCII but '"' and '\'.
func IsPlain(c byte) bool { return plain[c] }

// IsSafe reports whether c is safe: any byte but '"', '\' and control characters.
func IsSafe(c byte) bool { return safe[c] }

// PlainRun returns the index of the first byte of b at or after i that is not plain, or len(b):
// eight bytes at a time, byte by byte in the last few.
func PlainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := NotPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// SafeRun returns the index of the first byte of b at or after i that is not safe, or len(b).
func SafeRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := NotSafe(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && safe[b[i]] {
		i++
	}
	return i
}

// PlainEnd is the common case of Scan in a function small enough to be inlined: the index of the
// closing quote of the string whose content starts at i, when the content is plain and the quote
// lies in whole words of b from i; otherwise -1 (and Scan, from i, finds out the rest).
func PlainEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := NotPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			if i += bits.TrailingZeros64(m) >> 3; b[i] == '"' {
				return i
			}
			return -1
		}
	}
	return -1
}

// SafeEnd is PlainEnd for safe content, the common case of Check.
func SafeEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := NotSafe(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			if i += bits.TrailingZeros64(m) >> 3; b[i] == '"' {
				return i
			}
			return -1
		}
	}
	return -1
}

// End returns the index of the closing quote of the string whose content starts at i, or -1 if b
// ends first: the first '"' not escaped by a '\' (which escapes the byte after it, whatever it
// is). It checks nothing else; it is for text known to be valid.
//
// Eight bytes at a time for the first endWords words without a quote, backslash or control
// character; a string that goes on longer than that is likely long (a managedFields entry, an
// annotation holding a JSON document), and longEnd takes the rest with bytes.IndexByte.
func End(b []byte, i int) int {
	for words := 0; i+8 <= len(b); {
		m := NotSafe(binary.LittleEndian.Uint64(b[i:]))
		if m == 0 {
			if words++; words == endWords {
				return longEnd(b, i+8)
			}
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) >> 3
		switch b[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default: // a control character: not valid JSON, not checked here
			i++
		}
	}
	for i < len(b) {
		switch b[i] {
		case '"':
			return i
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return -1
}

// endWords is the number of words of safe bytes after which End takes a string for long. From
// then on bytes.IndexByte (vector instructions, 16 or 32 bytes at a time, but a call) costs less
// than eight bytes at a time: a quarter of the time from a few hundred bytes on, the same on the
// strings of an object's metadata.
const endWords = 4

// longEnd is End from i, a byte that is not escaped: to each '"' with bytes.IndexByte, the end of
// the string if an even number of backslashes precede it (each escaping the next, the last escapes
// no quote). Counting stops at i: the bytes before it are no escape's.
func longEnd(b []byte, i int) int {
	for i < len(b) {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		p := q
		for p > i && b[p-1] == '\\' {
			p--
		}
		if (q-p)%2 == 0 {
			return q
		}
		i = q + 1
	}
	return -1
}

// Flags say what a string holds besides plain bytes.
type Flags uint8

const (
	// Escaped: the string has a '\' escape.
	Escaped Flags = 1 << iota
	// NonASCII: the string has a byte of 0x80 or above (valid UTF-8 or not: Scan does not check).
	NonASCII
)

// Fault says why the text after a string's opening quote is not a valid JSON string.
type Fault uint8

const (
	// OK: the string is valid (but for UTF-8, which Scan and Check leave to the decoder).
	OK Fault = iota
	// Unterminated: the input ends inside the string (the offset of the fault is len(b)).
	Unterminated
	// Control: an unescaped control character (below 0x20).
	Control
	// BadEscape: a '\' followed by a byte that starts no escape, or by the end of the input (the
	// offset is that of the byte after the '\', len(b) at the end).
	BadEscape
	// BadUnicode: a \u escape without four hex digits (the offset is that of the first byte that
	// is not one, len(b) at the end).
	BadUnicode
)

// String describes f ("invalid escape in string").
func (f Fault) String() string {
	switch f {
	case OK:
		return "ok"
	case Unterminated:
		return "unterminated string"
	case Control:
		return "unescaped control character in string"
	case BadEscape:
		return "invalid escape in string"
	case BadUnicode:
		return `invalid \u escape in string`
	default:
		return "unknown fault"
	}
}

// Scan finds the closing quote of the string whose content starts at i, checking that the string
// has no control character and only valid escapes, not that its bytes of 0x80 and above are valid
// UTF-8 (who decodes the string checks that, when NonASCII says there are some). It returns the
// index of the closing quote and what the string holds; or, with a Fault other than OK, the offset
// of the first byte at fault (len(b) when the input ends).
func Scan(b []byte, i int) (end int, f Flags, fault Fault) {
	for {
		if f&NonASCII == 0 {
			i = PlainRun(b, i)
		} else {
			i = SafeRun(b, i) // the string is known not to be plain: stop only where it must
		}
		if i >= len(b) {
			return len(b), f, Unterminated
		}
		switch c := b[i]; {
		case c == '"':
			return i, f, OK
		case c == '\\':
			f |= Escaped
			if i, fault = escape(b, i); fault != OK {
				return i, f, fault
			}
		case c >= 0x80:
			f |= NonASCII
			i++
		default:
			return i, f, Control
		}
	}
}

// Check is Scan for a string that is skipped: it does not stop at bytes of 0x80 and above, and
// does not say what the string holds.
func Check(b []byte, i int) (end int, fault Fault) {
	for {
		i = SafeRun(b, i)
		if i >= len(b) {
			return len(b), Unterminated
		}
		switch b[i] {
		case '"':
			return i, OK
		case '\\':
			if i, fault = escape(b, i); fault != OK {
				return i, fault
			}
		default:
			return i, Control
		}
	}
}

// escape checks the escape whose '\' is at b[i] and returns the index after it, or the offset of
// the fault.
func escape(b []byte, i int) (int, Fault) {
	if i+1 >= len(b) {
		return len(b), BadEscape
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, OK
	case 'u':
		for j := i + 2; j < i+6; j++ {
			if j >= len(b) {
				return len(b), BadUnicode
			}
			if !isHex(b[j]) {
				return j, BadUnicode
			}
		}
		return i + 6, OK
	default:
		return i + 1, BadEscape
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// space marks JSON whitespace.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// IsSpace reports whether c is JSON whitespace: ' ', '\t', '\n' or '\r'.
func IsSpace(c byte) bool { return c <= ' ' && space[c] }

// SkipSpace returns the index of the first byte of b at or after i that is not whitespace, or
// len(b). It compares each byte with the space before looking it up: most bytes are above it, and
// compact JSON has no whitespace to skip.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && space[b[i]] {
		i++
	}
	return i
}
