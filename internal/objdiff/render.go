package objdiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// none is how an absent value is written in lines.
const none = "<none>"

// String renders the change as "<path> <old> -> <new>", values in full.
func (c Change) String() string { return c.Line(0) }

// Line renders the change as "<path> <old> -> <new>" with each value cut to max bytes (0: no
// limit). Absent values are written <none>, the unknown old value of an OpPatch change <unknown>;
// plain strings without quotes (see formatValue).
func (c Change) Line(max int) string {
	bp := linePool.Get().(*[]byte)
	b := c.appendLine((*bp)[:0], max)
	line := string(b)
	if cap(b) <= 64<<10 {
		*bp = b
		linePool.Put(bp)
	}
	return line
}

// appendLine appends Line(max) to dst.
func (c Change) appendLine(dst []byte, max int) []byte {
	path := c.Path
	if path == "" {
		path = "."
	}
	dst = append(dst, path...)
	dst = append(dst, ' ')
	if c.Op == OpPatch {
		dst = append(dst, unknownValue...)
	} else {
		dst = appendValue(dst, c.Old, max)
	}
	dst = append(dst, " -> "...)
	return appendValue(dst, c.New, max)
}

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// formatValue renders a JSON value for a line: <none> when absent, a string without its quotes
// when that cannot be mistaken for another value (non-empty, no spaces, quotes or control
// characters, not starting with '<', '{' or '[', not a number, true, false or null; redaction
// markers are shown bare too), anything else as compact JSON. Longer results are cut to max
// bytes (0: no limit) and end with "…".
func formatValue(v json.RawMessage, max int) string {
	return string(appendValue(nil, v, max))
}

func appendValue(dst []byte, v []byte, max int) []byte {
	v = trim(v)
	if len(v) == 0 {
		return append(dst, none...)
	}
	start := len(dst)
	done := false
	if v[0] == '"' {
		if bytes.IndexByte(v, '\\') < 0 {
			if u := v[1 : len(v)-1]; plainString(string(u)) || isMarker(u) {
				dst = append(dst, u...)
				done = true
			}
		} else if u := unquote(v); plainString(u) || isMarker([]byte(u)) {
			dst = append(dst, u...)
			done = true
		}
	}
	if !done {
		if bytes.ContainsAny(v, "\n\r\t") {
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err == nil {
				v = buf.Bytes()
			}
		}
		dst = append(dst, v...)
	}
	if max > 0 && len(dst)-start > max {
		cut := start + max
		for cut > start && (dst[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		dst = append(dst[:cut], "…"...)
	}
	return dst
}

func isMarker(u []byte) bool {
	return bytes.HasPrefix(u, []byte("<redacted:")) && bytes.HasSuffix(u, []byte(">"))
}

func plainString(s string) bool {
	if s == "" || s == "true" || s == "false" || s == "null" {
		return false
	}
	switch s[0] {
	case '<', '{', '[', '"', '-':
		if s[0] != '-' || isNumber(s) {
			return false
		}
	}
	if isNumber(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == '"' || c == 0x7f {
			return false
		}
	}
	return true
}

// isNumber reports whether s could be read as a number (a JSON number, or what strconv accepts:
// Inf, NaN, hex floats ...), without allocating.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if c == '+' || c == '-' {
		if len(s) == 1 {
			return false
		}
		c = s[1]
	}
	switch {
	case c >= '0' && c <= '9', c == '.':
		for i := 0; i < len(s); i++ {
			if !strings.ContainsRune("0123456789.eE+-", rune(s[i])) {
				return false // e.g. a timestamp: not worth a failed parse
			}
		}
		_, err := strconv.ParseFloat(s, 64)
		return err == nil || !isSyntaxOnly(err)
	case c == 'i' || c == 'I' || c == 'n' || c == 'N':
		_, err := strconv.ParseFloat(s, 64)
		return err == nil
	}
	return false
}

// isSyntaxOnly reports whether err is a syntax error (a range error still means a number).
func isSyntaxOnly(err error) bool {
	var ne *strconv.NumError
	return errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrSyntax)
}
