package objdiff

import (
	"bytes"

	"github.com/kelemetry/kelemetry/diff"
)

var stripSet = func() map[string]struct{} {
	m := make(map[string]struct{}, len(stripPaths))
	for _, p := range stripPaths {
		m[p] = struct{}{}
	}
	return m
}()

// Snapshot returns body, a JSON object of resource res (the zero Resource when unknown), as it is
// shown and stored: without metadata.managedFields and with redacted values replaced by markers.
// Snapshots of one object compare with Compare like the original bodies (a redacted value keeps
// its marker as long as it does not change). The result never aliases body.
func (d *Differ) Snapshot(res diff.Resource, body []byte) ([]byte, error) {
	body = trim(body)
	if len(body) == 0 {
		return nil, errSyntax
	}
	w := d.walker(res, body)
	defer w.release()
	if w.p.stripOnly {
		if out, ok := stripManagedFields(body); ok {
			return out, nil
		}
	}
	w.strip = true
	out := w.rewrite(make([]byte, 0, len(body)), body, false)
	if w.err != nil {
		return nil, w.err
	}
	return out, nil
}

// ManagedFields says where a caller that already scanned a body found its
// metadata.managedFields, so that SnapshotKnown need not scan for it again: the byte offsets in
// the body of the member's value (Start < End), or Absent when the body's metadata is an object
// without it.
type ManagedFields struct {
	Start, End int
	Absent     bool
}

// snapshotKnown is Snapshot for a body whose metadata.managedFields the caller located (mf, as
// offsets into body as given). The result is the same as Snapshot's when mf is right; a value
// at mf that is not a member named managedFields is ignored (Snapshot scans as usual). The
// caller vouches that the member is metadata's and that metadata is an object.
func (d *Differ) snapshotKnown(res diff.Resource, body []byte, mf ManagedFields) ([]byte, error) {
	snap, _, err := d.SnapshotKnownLayout(res, body, mf, nil)
	return snap, err
}

// SnapshotKnownLayout is SnapshotKnown for a body whose Layout the caller recorded too (lay,
// finished with the body's length; nil when it has none). It also returns the Layout of the
// snapshot, for Write.SnapshotLayout: lay itself when the snapshot is body unchanged, a new one
// when managedFields was cut, nil when lay is missing or the snapshot was rewritten. lay is read
// only.
func (d *Differ) SnapshotKnownLayout(res diff.Resource, body []byte, mf ManagedFields, lay *Layout) ([]byte, *Layout, error) {
	if res == (diff.Resource{}) || !d.planFor(res).stripOnly {
		snap, err := d.Snapshot(res, body)
		return snap, nil, err
	}
	if !lay.usableFor(body) {
		lay = nil
	}
	lead := len(body) - len(trimLeft(body))
	t := trim(body)
	if mf.Absent {
		if len(t) > 0 && t[0] == '{' {
			if lay != nil && len(t) != len(body) {
				lay = lay.cut(lead, lead+len(t), lead, lead)
			}
			return bytes.Clone(t), lay, nil
		}
		snap, err := d.Snapshot(res, body)
		return snap, nil, err
	}
	if !isManagedFieldsValue(body, mf.Start, mf.End) {
		snap, err := d.Snapshot(res, body)
		return snap, nil, err
	}
	cs, ce := memberCut(t, mf.Start-lead, mf.End-lead)
	snap := make([]byte, 0, len(t)-(ce-cs))
	snap = append(append(snap, t[:cs]...), t[ce:]...)
	if lay != nil {
		lay = lay.cut(lead, lead+len(t), lead+cs, lead+ce)
	}
	return snap, lay, nil
}

// isManagedFieldsValue reports whether body[start:end] is a JSON value that follows a member
// name "managedFields" and its colon.
func isManagedFieldsValue(body []byte, start, end int) bool {
	if start <= 0 || end > len(body) || start >= end {
		return false
	}
	switch body[start] {
	case '[':
		if body[end-1] != ']' {
			return false
		}
	case '{':
		if body[end-1] != '}' {
			return false
		}
	case 'n':
		if string(body[start:end]) != "null" {
			return false
		}
	default:
		return false
	}
	i := start - 1
	for i >= 0 && isSpace(body[i]) {
		i--
	}
	if i < 0 || body[i] != ':' {
		return false
	}
	i--
	for i >= 0 && isSpace(body[i]) {
		i--
	}
	const key = `"managedFields"`
	return i+1 >= len(key) && string(body[i+1-len(key):i+1]) == key
}

// rewrite appends v to dst, dropping stripped fields (in snapshot mode) and replacing redacted
// values by markers. Objects under redaction keep their keys.
func (w *walker) rewrite(dst, v []byte, red bool) []byte {
	if w.err != nil {
		return dst
	}
	if !red && w.p.anyRegex && w.regexHere() {
		red = true
	}
	k := kindOf(v)
	if red && k != '{' {
		return w.marker(dst, v)
	}
	if !red && !w.mayDescend() {
		return append(dst, v...)
	}
	switch k {
	case '{':
		ms, err := parseObject(nil, v, nil)
		if err != nil {
			w.err = err
			return dst
		}
		dst = append(dst, '{')
		first := true
		for _, m := range ms {
			pl, ql := w.pushKey(m.key)
			if w.strip {
				if _, drop := stripSet[string(w.pat)]; drop {
					w.pop(pl, ql)
					continue
				}
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, m.key...)
			dst = append(dst, ':')
			if red {
				dst = w.marker(dst, m.val)
			} else {
				dst = w.rewrite(dst, m.val, w.redactedHere())
			}
			w.pop(pl, ql)
		}
		return append(dst, '}')
	case '[':
		items, err := parseArray(nil, v, nil)
		if err != nil {
			w.err = err
			return dst
		}
		var key string
		var vals [][][]byte
		if w.p.anyRegex {
			key, vals = w.mergeKey([][][]byte{items}, []*index{nil})
		}
		dst = append(dst, '[')
		for i, item := range items {
			var pl, ql int
			if key != "" {
				pl, ql = w.pushItem(key, vals[0][i])
			} else {
				pl, ql = w.pushIndex(i)
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = w.rewrite(dst, item, w.redactedHere())
			w.pop(pl, ql)
		}
		return append(dst, ']')
	default:
		return append(dst, v...)
	}
}

// stripManagedFields copies body without metadata.managedFields, scanning only up to the end of
// metadata (the API server writes it before spec and status). ok is false when body is not an
// object with a metadata object.
func stripManagedFields(body []byte) ([]byte, bool) {
	ms, ok := memberStart(body, "metadata")
	if !ok || body[ms] != '{' {
		return nil, false
	}
	// The metadata value runs to the end of body as far as the search is concerned: the search
	// stops at managedFields, or fails at metadata's closing brace.
	meta := body[ms:]
	fs, fe, ok := memberExtent(meta, "managedFields")
	if !ok {
		return bytes.Clone(body), true
	}
	return cutMember(body, ms+fs, ms+fe), true
}

// cutMember copies body without the object member whose value is body[fs:fe]: its key, the
// value and one adjacent comma.
func cutMember(body []byte, fs, fe int) []byte {
	cutStart, cutEnd := memberCut(body, fs, fe)
	out := make([]byte, 0, len(body)-(cutEnd-cutStart))
	out = append(out, body[:cutStart]...)
	out = append(out, body[cutEnd:]...)
	return out
}

// memberCut returns the bytes cutMember leaves out, body[cutStart:cutEnd].
func memberCut(body []byte, fs, fe int) (cutStart, cutEnd int) {
	ks := fs
	for ks > 0 && body[ks-1] != ',' && body[ks-1] != '{' {
		ks--
	}
	cutStart, cutEnd = ks, skipSpace(body, fe)
	if cutEnd < len(body) && body[cutEnd] == ',' {
		cutEnd = skipSpace(body, cutEnd+1) // drop the comma after
	} else if cutStart > 0 && body[cutStart-1] == ',' {
		cutStart-- // last member: drop the comma before
	}
	return cutStart, cutEnd
}

// memberStart returns where the value of the top-level member key of obj starts, scanning only
// the members before it.
func memberStart(obj []byte, key string) (int, bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return 0, false
	}
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ke, err := stringEnd(obj, i)
		if err != nil {
			return 0, false
		}
		k := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return 0, false
		}
		i = skipSpace(obj, i+1)
		if i >= len(obj) {
			return 0, false
		}
		if keyIs(k, key) {
			return i, true
		}
		ve, err := valueEnd(obj, i, nil)
		if err != nil {
			return 0, false
		}
		i = skipSpace(obj, ve)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return 0, false
}

// memberExtent returns the extent of the value of the top-level member key of obj, scanning no
// further than that member.
func memberExtent(obj []byte, key string) (start, end int, ok bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return 0, 0, false
	}
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ke, err := stringEnd(obj, i)
		if err != nil {
			return 0, 0, false
		}
		k := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(obj, i+1)
		ve, err := valueEnd(obj, i, nil)
		if err != nil {
			return 0, 0, false
		}
		if keyIs(k, key) {
			return i, ve, true
		}
		i = skipSpace(obj, ve)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return 0, 0, false
}
