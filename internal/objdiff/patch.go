package objdiff

import (
	"bytes"
	"strings"

	"github.com/kelemetry/kelemetry/diff"
)

// OpPatch is the kind of a change read from a request's patch rather than from two versions:
// the patch sets the field to New (nil: the patch removes it); the value before is unknown.
const OpPatch op = "patch"

// OpRequestPatch is the AttrOp of the note that heads the changes read from a request's patch.
const OpRequestPatch = "request_patch"

// unknownValue stands for the value before a change read from a patch.
const unknownValue = "<unknown>"

// Patch kinds, as the note names them.
const (
	patchMerge     = "merge patch"
	patchStrategic = "strategic merge patch"
)

// patchChanges reads a merge or strategic-merge patch, the request body of a patch of an object
// of resource res, as the changes it asks for: one OpPatch change per field it sets or removes
// (null), with nested objects followed down to their fields; lists are whole values. The
// patch's values are redacted like snapshots, and ignored paths (Options.Ignore: the
// resourceVersion a patch carries as a precondition) are left out; the strategic merge patch's
// $setElementOrder directives (order only) are skipped, its other directives kept as fields.
// ok is false for what is not such a patch: a JSON patch (a list of operations), an apply
// configuration (it names apiVersion and kind: the caller's whole intent, not a change), a
// body that is not a JSON object.
func (d *Differ) patchChanges(res diff.Resource, body []byte) (changes []Change, kind string, ok bool) {
	body = trim(body)
	if kindOf(body) != '{' {
		return nil, "", false
	}
	if _, hasKind := lookupMember(body, "kind", nil); hasKind {
		if _, hasAPIVersion := lookupMember(body, "apiVersion", nil); hasAPIVersion {
			return nil, "", false
		}
	}
	snap, err := d.Snapshot(res, body)
	if err != nil {
		return nil, "", false
	}
	w := d.walker(res, snap)
	defer w.release()
	kind = patchMerge
	if !w.patchFields(&changes, snap, &kind) {
		return nil, "", false
	}
	return changes, kind, true
}

// patchFields appends the changes an object of a patch asks for at the walker's path; false
// when v is not valid JSON.
func (w *walker) patchFields(dst *[]Change, v []byte, kind *string) bool {
	ms, err := parseObject(nil, v, nil)
	if err != nil {
		return false
	}
	for _, m := range ms {
		key := unquote(m.key)
		if strings.HasPrefix(key, "$") {
			*kind = patchStrategic
			if strings.HasPrefix(key, "$setElementOrder/") {
				continue
			}
		}
		pl, ql := w.pushKey(m.key)
		if !w.ignored() {
			val := trim(m.val)
			switch {
			case kindOf(val) == '{' && !emptyObject(val):
				if !w.patchFields(dst, val, kind) {
					return false
				}
			case isNull(val):
				*dst = append(*dst, Change{Path: string(w.path), Op: OpPatch})
			default:
				c := Change{Path: string(w.path), Op: OpPatch, New: val}
				if kindOf(val) == '"' && isMarker(val[1:len(val)-1]) {
					c.Redacted = true
				}
				*dst = append(*dst, c)
			}
		}
		w.pop(pl, ql)
	}
	return true
}

// emptyObject reports whether v, a JSON object, has no members.
func emptyObject(v []byte) bool {
	return len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}
