package jsonscan

import "encoding/json"

import "strings"

// The byte-at-a-time references the word-at-a-time functions must agree with. They are written
// from the JSON grammar, sharing no table or helper with the package.

func refPlain(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

func refSafe(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// refHTMLPlain asks encoding/json itself: a byte it writes as it is in a string.
func refHTMLPlain(c byte) bool {
	out, err := json.Marshal(string([]byte{c}))
	return err == nil && string(out) == `"`+string([]byte{c})+`"`
}

func refSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// refRun is PlainRun or SafeRun (in: refPlain or refSafe).
func refRun(b []byte, i int, in func(byte) bool) int {
	for i < len(b) && in(b[i]) {
		i++
	}
	return i
}

// refQuickEnd is PlainEnd or SafeEnd: the end of a string of bytes in the class, found in whole
// words of b from i.
func refQuickEnd(b []byte, i int, in func(byte) bool) int {
	j := refRun(b, i, in)
	if j >= len(b) || b[j] != '"' || i+(j-i)/8*8+8 > len(b) {
		return -1
	}
	return j
}

func refEnd(b []byte, i int) int {
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

func refScan(b []byte, i int) (int, Flags, Fault) {
	var f Flags
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			return i, f, OK
		case c < 0x20:
			return i, f, Control
		case c != '\\':
			if c >= 0x80 {
				f |= NonASCII
			}
			i++
			continue
		}
		f |= Escaped
		if i+1 == len(b) {
			return len(b), f, BadEscape
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			for k := 2; k < 6; k++ {
				if i+k == len(b) {
					return len(b), f, BadUnicode
				}
				if !strings.ContainsRune("0123456789abcdefABCDEF", rune(b[i+k])) {
					return i + k, f, BadUnicode
				}
			}
			i += 6
		default:
			return i + 1, f, BadEscape
		}
	}
	return len(b), f, Unterminated
}

func refSkipSpace(b []byte, i int) int { return refRun(b, i, refSpace) }
