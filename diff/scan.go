package diff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// A minimal scanner over JSON that is already known to be (almost certainly) valid: it finds the
// extent of values without decoding them. Malformed input yields an error, never a panic.

var errSyntax = errors.New("diff: malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// trim removes surrounding whitespace.
// trimLeft returns b without leading JSON whitespace.
func trimLeft(b []byte) []byte {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return b[i:]
}

func trim(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// stringEnd returns the index just past the string that starts (with its quote) at b[i]. It
// skips 8 bytes at a time while they hold no quote or backslash.
func stringEnd(b []byte, i int) (int, error) {
	j := i + 1
	for j < len(b) {
		for j+8 <= len(b) && !hasQuoteOrBackslash(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		// A quote or a backslash is within the next 8 bytes (or the input ends first).
		for j < len(b) {
			c := b[j]
			if c == '"' {
				return j + 1, nil
			}
			j++
			if c == '\\' {
				j++ // the escaped byte
				break
			}
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", errSyntax)
}

// hasQuoteOrBackslash reports whether any byte of w is '"' or '\\' (has-zero-byte tests of w
// xor each, from "Bit Twiddling Hacks").
func hasQuoteOrBackslash(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, bs := w^(lo*'"'), w^(lo*'\\')
	return ((q-lo)&^q|(bs-lo)&^bs)&hi != 0
}

// valueEnd returns the index just past the value that starts at b[i] (no leading space).
func valueEnd(b []byte, i int, x *index) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: unexpected end", errSyntax)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		if x != nil {
			if end, ok := x.end(b, i); ok {
				if end > len(b) {
					return 0, fmt.Errorf("%w: container past the end", errSyntax)
				}
				return end, nil
			}
		}
		return containerEnd(b, i)
	default:
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || c == ':' || isSpace(c) {
				break
			}
			j++
		}
		if j == i {
			return 0, fmt.Errorf("%w: unexpected %q", errSyntax, b[i])
		}
		return j, nil
	}
}

// member is one member of a JSON object: its raw key (quotes included) and raw value.
type member struct {
	key []byte
	val []byte
}

// parseObject splits a JSON object into its members, appended to dst.
func parseObject(dst []member, b []byte, x *index) ([]member, error) {
	if len(b) < 2 || b[0] != '{' {
		return dst, fmt.Errorf("%w: not an object", errSyntax)
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return dst, nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return dst, fmt.Errorf("%w: object key", errSyntax)
		}
		ke, err := stringEnd(b, i)
		if err != nil {
			return dst, err
		}
		key := b[i:ke]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return dst, fmt.Errorf("%w: missing colon", errSyntax)
		}
		i = skipSpace(b, i+1)
		ve, err := valueEnd(b, i, x)
		if err != nil {
			return dst, err
		}
		dst = append(dst, member{key: key, val: b[i:ve]})
		i = skipSpace(b, ve)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return dst, nil
		default:
			return dst, fmt.Errorf("%w: after object member", errSyntax)
		}
	}
	return dst, fmt.Errorf("%w: unterminated object", errSyntax)
}

// parseArray splits a JSON array into its elements, appended to dst.
func parseArray(dst [][]byte, b []byte, x *index) ([][]byte, error) {
	if len(b) < 2 || b[0] != '[' {
		return dst, fmt.Errorf("%w: not an array", errSyntax)
	}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return dst, nil
	}
	for i < len(b) {
		ve, err := valueEnd(b, i, x)
		if err != nil {
			return dst, err
		}
		dst = append(dst, b[i:ve])
		i = skipSpace(b, ve)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return dst, nil
		default:
			return dst, fmt.Errorf("%w: after array element", errSyntax)
		}
	}
	return dst, fmt.Errorf("%w: unterminated array", errSyntax)
}

// kindOf classifies a raw value: '{', '[', '"', 'n' (null), 'b' (bool), '0' (number).
func kindOf(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '{', '[', '"', 'n':
		return c
	case 't', 'f':
		return 'b'
	default:
		return '0'
	}
}

// unquote returns the content of a raw JSON string.
func unquote(raw []byte) string {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	s, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return string(raw)
	}
	return string(s)
}

// keyIs reports whether the raw key (quotes included) is want.
func keyIs(raw []byte, want string) bool {
	if len(raw) == len(want)+2 && string(raw[1:len(raw)-1]) == want {
		return true
	}
	return bytes.IndexByte(raw, '\\') >= 0 && unquote(raw) == want
}

// index maps the position of every '{' and '[' of one document to its matching close, so that
// finding the end of a container costs a binary search instead of a scan. Positions are offsets
// in root; a sub-slice of root finds its offset from its capacity.
type index struct {
	root   []byte
	opens  []int32
	closes []int32
	stack  []int32
}

// special marks the bytes buildIndex stops at.
var special = func() (t [256]bool) {
	for _, c := range []byte(`"{}[]`) {
		t[c] = true
	}
	return t
}()

// build indexes root. It returns an error for unbalanced input.
func (x *index) build(root []byte) error {
	x.root = root
	x.opens, x.closes, x.stack = x.opens[:0], x.closes[:0], x.stack[:0]
	if len(root) > 1<<31-1 {
		return fmt.Errorf("%w: document too large", errSyntax)
	}
	n := len(root)
	for i := 0; i < n; i++ {
		for i < n && !special[root[i]] {
			i++
		}
		if i >= n {
			break
		}
		switch root[i] {
		case '"':
			end, err := stringEnd(root, i)
			if err != nil {
				return err
			}
			i = end - 1 // the loop steps past the closing quote
		case '{', '[':
			x.stack = append(x.stack, int32(len(x.opens)))
			x.opens = append(x.opens, int32(i))
			x.closes = append(x.closes, -1)
		default: // '}', ']'
			if len(x.stack) == 0 {
				return fmt.Errorf("%w: unbalanced %q", errSyntax, root[i])
			}
			top := x.stack[len(x.stack)-1]
			x.stack = x.stack[:len(x.stack)-1]
			if (root[x.opens[top]] == '{') != (root[i] == '}') {
				return fmt.Errorf("%w: mismatched %q", errSyntax, root[i])
			}
			x.closes[top] = int32(i)
		}
	}
	if len(x.stack) != 0 {
		return fmt.Errorf("%w: unterminated container", errSyntax)
	}
	return nil
}

// end returns the index in b just past the container that starts at b[i], b being a sub-slice
// of the indexed root; ok is false when b is not part of root.
func (x *index) end(b []byte, i int) (int, bool) {
	if x == nil || cap(b) > cap(x.root) {
		return 0, false
	}
	off := cap(x.root) - cap(b)
	if off+len(b) > len(x.root) || len(b) == 0 || &x.root[off] != &b[0] {
		return 0, false
	}
	abs := int32(off + i)
	lo, hi := 0, len(x.opens)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.opens[m] < abs {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(x.opens) || x.opens[lo] != abs {
		return 0, false
	}
	return int(x.closes[lo]) + 1 - off, true
}

// containerEnd returns the index just past the object or array that starts at b[i].
func containerEnd(b []byte, i int) (int, error) {
	depth := 0
	n := len(b)
	for j := i; j < n; j++ {
		for j < n && !special[b[j]] {
			j++
		}
		if j >= n {
			break
		}
		switch b[j] {
		case '"':
			end, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1 // the loop steps past the closing quote
		case '{', '[':
			depth++
		default:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: unterminated container", errSyntax)
}
