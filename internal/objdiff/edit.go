package objdiff

import "fmt"

// memberRange returns the extent [start, end) of the value of the top-level member key of obj,
// scanning no further; when key is missing, it returns the position of obj's closing brace.
func memberRange(obj []byte, key string, x *index) (start, end, closing int, found bool, err error) {
	if len(obj) < 2 || obj[0] != '{' {
		return 0, 0, 0, false, fmt.Errorf("%w: not an object", errSyntax)
	}
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ke, err := stringEnd(obj, i)
		if err != nil {
			return 0, 0, 0, false, err
		}
		k := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, 0, false, fmt.Errorf("%w: missing colon", errSyntax)
		}
		i = skipSpace(obj, i+1)
		ve, err := valueEnd(obj, i, x)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if keyIs(k, key) {
			return i, ve, -1, true, nil
		}
		i = skipSpace(obj, ve)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	if i >= len(obj) || obj[i] != '}' {
		return 0, 0, 0, false, fmt.Errorf("%w: unterminated object", errSyntax)
	}
	return start, end, i, found, nil
}

// getPath returns the raw value at a path of plain member names.
func getPath(obj []byte, keys ...string) ([]byte, bool) {
	v := trim(obj)
	for _, k := range keys {
		var ok bool
		if v, ok = lookupMember(v, k, nil); !ok {
			return nil, false
		}
	}
	return v, true
}

// setPath returns a copy of obj with the value at a path of plain member names set to val,
// creating missing objects on the way.
func setPath(obj []byte, val []byte, keys ...string) ([]byte, error) {
	out, _, _, _, err := replacePath(obj, nil, val, keys...)
	return out, err
}

// splice says how an edit made its output: out is in[:start], then n new bytes, then in[end:].
type splice struct{ start, end, n int }

// replacePath is setPath that also returns the value it replaced (had is false when there was
// none), read in the same pass, and where the output differs from obj. x, the index of obj or
// nil, speeds up the search.
func replacePath(obj []byte, x *index, val []byte, keys ...string) (out, old []byte, had bool, sp splice, err error) {
	if len(keys) == 0 {
		return val, obj, true, splice{0, len(obj), len(val)}, nil
	}
	lead := len(obj) - len(trimLeft(obj))
	obj = trim(obj)
	start, end, closing, found, err := memberRange(obj, keys[0], x)
	if err != nil {
		return nil, nil, false, splice{}, err
	}
	if len(keys) > 1 {
		child, isObject := []byte("{}"), found && kindOf(obj[start:end]) == '{'
		if isObject {
			child = obj[start:end]
		}
		var childHad bool
		var csp splice
		if val, old, childHad, csp, err = replacePath(child, x, val, keys[1:]...); err != nil {
			return nil, nil, false, splice{}, err
		}
		had = isObject && childHad
		if isObject { // the child's edit, where the child is
			sp = splice{lead + start + csp.start, lead + start + csp.end, csp.n}
		} else {
			sp = splice{lead + start, lead + end, len(val)}
		}
	} else if found {
		old, had = obj[start:end], true
		sp = splice{lead + start, lead + end, len(val)}
	}
	out = make([]byte, 0, len(obj)+len(keys[0])+len(val)+4)
	if found {
		out = append(out, obj[:start]...)
		out = append(out, val...)
		return append(out, obj[end:]...), old, had, sp, nil
	}
	out = append(out, obj[:closing]...)
	if len(trim(obj[1:closing])) > 0 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, keys[0]...) // keys set here are plain identifiers
	out = append(out, '"', ':')
	out = append(out, val...)
	sp = splice{lead + closing, lead + closing, len(out) - closing}
	return append(out, obj[closing:]...), old, had, sp, nil
}
