package objdiff

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kelemetry/kelemetry/internal/jsonscan"
)

// A minimal scanner over JSON that is already known to be (almost certainly) valid: it finds the
// extent of values without decoding them. Malformed input yields an error, never a panic.

var errSyntax = errors.New("diff: malformed JSON")

func isSpace(c byte) bool { return jsonscan.IsSpace(c) }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

// trimLeft returns b without leading JSON whitespace.
func trimLeft(b []byte) []byte { return b[jsonscan.SkipSpace(b, 0):] }

// trim removes surrounding whitespace.
func trim(b []byte) []byte {
	i, j := jsonscan.SkipSpace(b, 0), len(b)
	for j > i && jsonscan.IsSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// stringEnd returns the index just past the string that starts (with its quote) at b[i]. It does
// not check the string (jsonscan.End).
func stringEnd(b []byte, i int) (int, error) {
	j := jsonscan.End(b, i+1)
	if j < 0 {
		return 0, errUnterminatedString
	}
	return j + 1, nil
}

var errUnterminatedString = fmt.Errorf("%w: unterminated string", errSyntax)

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

// Layout records where the objects and arrays of one JSON document open and close, as byte
// offsets from its first byte, so that a comparison finds the end of a container with a binary
// search instead of a scan. Whoever scans a document anyway (the audit decoder, which checks every
// response body) can record its Layout on the way with Open and Close and hand it to the Stream
// with the snapshot (Write.SnapshotLayout), which then does not scan the document again.
//
// Containers shorter than minIndexed bytes are left out: scanning one costs less than looking it
// up, and the Layout stays small. The zero value is an empty Layout, ready for Open.
type Layout struct {
	opens  []int32 // offsets of the '{' and '[' of the recorded containers, ascending
	closes []int32 // offsets of their matching '}' and ']'
	stack  []int32 // slots of the containers open while recording
	size   int     // the document's length, set by Finish
	ok     bool    // Finish found every container closed
	bad    bool    // a Close without an Open, or an offset out of range
}

// minIndexed is the length from which a container is recorded in a Layout.
const minIndexed = 64

// Reset empties l for another document, keeping its buffers.
func (l *Layout) Reset() {
	l.opens, l.closes, l.stack = l.opens[:0], l.closes[:0], l.stack[:0]
	l.size, l.ok, l.bad = 0, false, false
}

// Open records the '{' or '[' at offset off.
func (l *Layout) Open(off int) {
	if off < 0 || off > maxLayoutOffset {
		l.bad = true
		return
	}
	l.stack = append(l.stack, int32(len(l.opens)))
	l.opens = append(l.opens, int32(off))
	l.closes = append(l.closes, -1)
}

// Close records the '}' or ']' at offset off, which closes the container opened last.
func (l *Layout) Close(off int) {
	n := len(l.stack) - 1
	if n < 0 || off-int(l.opens[l.stack[n]]) < minIndexed-1 {
		l.closeShort(off)
		return
	}
	l.closes[l.stack[n]] = int32(off) // Finish checks that off is within the document
	l.stack = l.stack[:n]
}

// closeShort is Close without an open container, or for one too short to keep (or that ends
// before it starts).
func (l *Layout) closeShort(off int) {
	n := len(l.stack) - 1
	if n < 0 {
		l.bad = true
		return
	}
	slot := l.stack[n]
	l.stack = l.stack[:n]
	if off < int(l.opens[slot]) || int(slot) != len(l.opens)-1 {
		// Everything recorded after a short container is inside it, so shorter still, and
		// already dropped: a short container is the last entry.
		l.bad = true
		return
	}
	l.opens, l.closes = l.opens[:slot], l.closes[:slot]
}

// Finish ends the recording of a document of size bytes. It reports whether the Layout is
// complete: every container closed, every offset within the document.
func (l *Layout) Finish(size int) bool {
	l.size = size
	l.ok = !l.bad && len(l.stack) == 0 && size <= maxLayoutOffset+1 && (len(l.opens) == 0 || l.opens[0] >= 0)
	for _, c := range l.closes {
		if int(c) >= size {
			l.ok = false
		}
	}
	return l.ok
}

// Clone returns a copy of a finished Layout in one allocation, without the recording state.
func (l *Layout) Clone() *Layout {
	n := len(l.opens)
	buf := make([]int32, 2*n)
	copy(buf, l.opens)
	copy(buf[n:], l.closes)
	return &Layout{opens: buf[:n:n], closes: buf[n:], size: l.size, ok: l.ok, bad: l.bad}
}

// Bytes is the memory l holds, by capacity.
func (l *Layout) Bytes() int {
	if l == nil {
		return 0
	}
	return 4*(cap(l.opens)+cap(l.closes)+cap(l.stack)) + int(unsafe.Sizeof(*l))
}

// LayoutOf scans doc, a JSON document, for its Layout. It returns an error for a document whose
// brackets do not balance (it checks no more than that).
func LayoutOf(doc []byte) (*Layout, error) {
	var x index
	if err := x.build(doc); err != nil {
		return nil, err
	}
	return x.Clone(), nil
}

// Equal reports whether l and o are finished Layouts of documents of one length that record the
// same containers.
func (l *Layout) Equal(o *Layout) bool {
	if l == nil || o == nil {
		return l == o
	}
	return l.ok == o.ok && l.size == o.size && slices.Equal(l.opens, o.opens) && slices.Equal(l.closes, o.closes)
}

// cut returns the Layout of the document made of l's document's bytes [from, cutStart) and
// [cutEnd, to), where no container starts or ends in the bytes left out except whole ones
// between cutStart and cutEnd (a member cut out of an object, the whitespace around a value).
func (l *Layout) cut(from, to, cutStart, cutEnd int) *Layout {
	gap := int32(cutEnd - cutStart)
	// The opens are ascending: [0, a) before the cut, [a, b) inside it, [b, n) after it.
	n := len(l.opens)
	a, _ := slices.BinarySearch(l.opens, int32(cutStart))
	b, _ := slices.BinarySearch(l.opens, int32(cutEnd))
	buf := make([]int32, 2*(n-(b-a)))
	opens, closes := buf[:0:len(buf)/2], buf[len(buf)/2:len(buf)/2]
	f := int32(from)
	for i := range a {
		o, c := l.opens[i]-f, l.closes[i]-f
		if int(l.closes[i]) >= cutEnd {
			// Around the cut (an ancestor of the member): shorter by the gap.
			if c -= gap; c-o+1 < minIndexed {
				continue
			}
		}
		opens = append(opens, o)
		closes = append(closes, c)
	}
	for i := b; i < n; i++ {
		opens = append(opens, l.opens[i]-f-gap)
		closes = append(closes, l.closes[i]-f-gap)
	}
	out := &Layout{opens: opens, closes: closes}
	out.Finish(to - from - int(gap))
	return out
}

// spliced returns the index of out, made from x's document by the edit sp (see replacePath), or
// nil when x is nil or does not cover the edit. What the edit wrote is not indexed (a missing
// container is scanned for; only recorded ones must be right).
func (x *index) spliced(out []byte, sp splice) *index {
	if x == nil || !x.ok || len(trim(x.root)) != len(x.root) || len(x.root)-(sp.end-sp.start)+sp.n != len(out) {
		return nil
	}
	delta := int32(sp.n - (sp.end - sp.start))
	s, e := int32(sp.start), int32(sp.end)
	buf := make([]int32, 2*len(x.opens))
	opens, closes := buf[:0:len(x.opens)], buf[len(x.opens):len(x.opens)]
	for i, o := range x.opens {
		c := x.closes[i]
		switch {
		case o >= e: // after the edit
			o, c = o+delta, c+delta
		case o >= s: // replaced
			continue
		case c >= e: // around the edit
			c += delta
			if c-o+1 < minIndexed {
				continue
			}
		case c >= s: // ends inside the edit: not an edit of whole values
			return nil
		}
		opens = append(opens, o)
		closes = append(closes, c)
	}
	out2 := &index{root: out, Layout: Layout{opens: opens, closes: closes}}
	if !out2.Finish(len(out)) {
		return nil
	}
	return out2
}

// usableFor reports whether l is the finished, complete Layout of a document of doc's length.
func (l *Layout) usableFor(doc []byte) bool {
	return l != nil && l.ok && l.size == len(doc)
}

// maxLayoutOffset is the largest offset a Layout holds.
const maxLayoutOffset = 1<<31 - 1

// index is the Layout of root, for finding the ends of its containers; a sub-slice of root finds
// its offset from its capacity.
type index struct {
	root []byte
	Layout
}

// indexes reports whether x is the complete index of doc (the same bytes in memory).
func (x *index) indexes(doc []byte) bool {
	return x != nil && x.ok && x.size == len(doc) && len(x.root) == len(doc) && len(doc) > 0 && &x.root[0] == &doc[0]
}

// indexOf is the index of doc from its Layout, or nil when lay is not doc's (as far as its
// length tells).
func indexOf(doc []byte, lay *Layout) *index {
	if !lay.usableFor(doc) || len(doc) == 0 {
		return nil
	}
	return &index{root: doc, Layout: Layout{opens: lay.opens, closes: lay.closes, size: lay.size, ok: true}}
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
	x.Reset()
	if len(root) > maxLayoutOffset {
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
			if i = jsonscan.End(root, i+1); i < 0 {
				return errUnterminatedString
			}
			// the loop steps past the closing quote
		case '{', '[':
			x.Open(i)
		default: // '}', ']'
			if len(x.stack) == 0 {
				return fmt.Errorf("%w: unbalanced %q", errSyntax, root[i])
			}
			top := x.stack[len(x.stack)-1]
			if (root[x.opens[top]] == '{') != (root[i] == '}') {
				return fmt.Errorf("%w: mismatched %q", errSyntax, root[i])
			}
			x.Close(i)
		}
	}
	if !x.Finish(n) {
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
			if j = jsonscan.End(b, j+1); j < 0 {
				return 0, errUnterminatedString
			}
			// the loop steps past the closing quote
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
