package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// pathSeg is one step of a diff path (objdiff.Change.Path): a field, a list index or a list item
// matched by merge key.
type pathSeg struct {
	kind  segKind
	field string // segField: the field name; segMatch: the merge key
	index int    // segIndex
	value string // segMatch: the key's value as a string (numbers as written)
	// before, on the last step of an add to a keyed list, is the item the new one goes before
	// (see applyWrite); nil appends it.
	before *pathSeg
}

// same reports whether s and o name the same step.
func (s pathSeg) same(o pathSeg) bool {
	return s.kind == o.kind && s.field == o.field && s.index == o.index && s.value == o.value
}

type segKind uint8

const (
	segField segKind = iota
	segIndex
	segMatch
)

var errBadPath = errors.New("malformed diff path")

// parsePath reads a path as the diff package writes it: fields joined by dots, ["key"] for
// fields that are not plain identifiers, [N] for list positions and [key=value] for list items
// matched by merge key (value bare, or as JSON when it is not a plain string). "" and "." are
// the whole document.
func parsePath(p string) ([]pathSeg, error) {
	if p == "" || p == "." {
		return nil, nil
	}
	var segs []pathSeg
	i := 0
	for i < len(p) {
		switch p[i] {
		case '.':
			if i == 0 || i+1 >= len(p) || p[i+1] == '.' || p[i+1] == '[' {
				return nil, fmt.Errorf("%w %q: stray dot at %d", errBadPath, p, i)
			}
			i++
		case '[':
			seg, n, err := parseBracket(p[i:])
			if err != nil {
				return nil, fmt.Errorf("%w %q at %d: %w", errBadPath, p, i, err)
			}
			segs = append(segs, seg)
			i += n
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			segs = append(segs, pathSeg{kind: segField, field: p[i:j]})
			i = j
		}
	}
	return segs, nil
}

// parseBracket reads one [...] step at the start of s and returns its length.
func parseBracket(s string) (pathSeg, int, error) {
	if len(s) > 1 && s[1] == '"' {
		end, err := quotedEnd(s, 1)
		if err != nil {
			return pathSeg{}, 0, err
		}
		if end >= len(s) || s[end] != ']' {
			return pathSeg{}, 0, errors.New("quoted field without ]")
		}
		var name string
		if err := json.Unmarshal([]byte(s[1:end]), &name); err != nil {
			return pathSeg{}, 0, fmt.Errorf("quoted field: %w", err)
		}
		return pathSeg{kind: segField, field: name}, end + 1, nil
	}
	eq := strings.IndexAny(s, "=]")
	if eq < 0 {
		return pathSeg{}, 0, errors.New("unterminated [")
	}
	if s[eq] == ']' {
		n, err := strconv.Atoi(s[1:eq])
		if err != nil || n < 0 {
			return pathSeg{}, 0, fmt.Errorf("bad list index %q", s[1:eq])
		}
		return pathSeg{kind: segIndex, index: n}, eq + 1, nil
	}
	key := s[1:eq]
	if key == "" {
		return pathSeg{}, 0, errors.New("empty merge key")
	}
	v := eq + 1
	if v < len(s) && s[v] == '"' {
		end, err := quotedEnd(s, v)
		if err != nil {
			return pathSeg{}, 0, err
		}
		if end >= len(s) || s[end] != ']' {
			return pathSeg{}, 0, errors.New("quoted merge key value without ]")
		}
		var val string
		if err := json.Unmarshal([]byte(s[v:end]), &val); err != nil {
			return pathSeg{}, 0, fmt.Errorf("merge key value: %w", err)
		}
		return pathSeg{kind: segMatch, field: key, value: val}, end + 1, nil
	}
	end := strings.IndexByte(s[v:], ']')
	if end < 0 {
		return pathSeg{}, 0, errors.New("unterminated [")
	}
	return pathSeg{kind: segMatch, field: key, value: s[v : v+end]}, v + end + 1, nil
}

// quotedEnd returns the index just past the JSON string starting at s[start].
func quotedEnd(s string, start int) (int, error) {
	for i := start + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated quote")
}

// matches reports whether item is an object whose key field equals v.
func (s pathSeg) matches(item any) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	switch x := m[s.field].(type) {
	case string:
		return x == s.value
	case json.Number:
		return x.String() == s.value
	default:
		return false
	}
}

// applyOp changes doc (decoded with json.Number) at path: op "add", "remove" or "replace"
// with value v. An add to a keyed list inserts the item before the one seg.before matches, or
// appends it, setting *blind when the list had items (the new item's place is then unknown).
// It returns the new document.
func applyOp(doc any, segs []pathSeg, op string, v any, blind *bool) (any, error) {
	if len(segs) == 0 {
		if op == "remove" {
			return nil, nil
		}
		return v, nil
	}
	seg, rest := segs[0], segs[1:]
	switch c := doc.(type) {
	case map[string]any:
		if seg.kind != segField {
			return doc, fmt.Errorf("list step on an object")
		}
		if len(rest) == 0 {
			switch op {
			case "remove":
				delete(c, seg.field)
			default:
				c[seg.field] = v
			}
			return c, nil
		}
		child, ok := c[seg.field]
		if !ok {
			return doc, fmt.Errorf("field %q not found", seg.field)
		}
		nc, err := applyOp(child, rest, op, v, blind)
		if err != nil {
			return doc, err
		}
		c[seg.field] = nc
		return c, nil
	case []any:
		i := -1
		switch seg.kind {
		case segField:
			return doc, fmt.Errorf("field %q on a list", seg.field)
		case segIndex:
			i = seg.index
		case segMatch:
			i = slices.IndexFunc(c, seg.matches)
		}
		if len(rest) == 0 && op == "add" {
			if seg.kind == segMatch {
				i = -1
				if seg.before != nil {
					i = slices.IndexFunc(c, seg.before.matches)
				}
				*blind = i < 0 && len(c) > 0
			}
			if i < 0 || i > len(c) {
				return append(c, v), nil
			}
			return slices.Insert(c, i, v), nil
		}
		if i < 0 || i >= len(c) {
			return doc, errors.New("list item not found")
		}
		if len(rest) == 0 {
			if op == "remove" {
				return slices.Delete(c, i, i+1), nil
			}
			c[i] = v
			return c, nil
		}
		nc, err := applyOp(c[i], rest, op, v, blind)
		if err != nil {
			return doc, err
		}
		c[i] = nc
		return c, nil
	default:
		return doc, errors.New("path goes through a value that is neither an object nor a list")
	}
}
