package objdiff

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math/big"
	"strconv"
	"sync"
	"unsafe"

	"github.com/kelemetry/kelemetry/diff"
)

// op is the kind of a change.
type op string

// Change kinds.
const (
	OpAdd     op = "add"     // the field or list item is new
	OpRemove  op = "remove"  // the field or list item is gone
	OpReplace op = "replace" // the value changed
)

// Change is one difference between two versions.
type Change struct {
	// Path locates the field: fields joined by dots (or written ["key"] when they are not plain
	// identifiers), list items by merge key ([name=app]) or else by index ([2]: the new index, or
	// the old one for a removal).
	Path string `json:"path"`
	Op   op     `json:"op"`
	// Old and New are the values as JSON; nil when absent (add, remove).
	Old json.RawMessage `json:"old,omitempty"`
	New json.RawMessage `json:"new,omitempty"`
	// Redacted says Old and New are redaction markers.
	Redacted bool `json:"redacted,omitempty"`
}

// Compare compares two JSON documents with opts. For repeated comparisons build a Differ once.
func Compare(old, new []byte, opts diff.Options) ([]Change, error) {
	d, err := New(opts)
	if err != nil {
		return nil, err
	}
	return d.Compare(diff.Resource{}, old, new)
}

// compareValues compares two decoded values (as from encoding/json, or any value that marshals
// to JSON) with opts.
func compareValues(old, new any, opts diff.Options) ([]Change, error) {
	ob, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("diff: encode old: %w", err)
	}
	nb, err := json.Marshal(new)
	if err != nil {
		return nil, fmt.Errorf("diff: encode new: %w", err)
	}
	return Compare(ob, nb, opts)
}

// Compare returns the changes from old to new, two JSON documents of resource res (the zero
// Resource when unknown). The result's values are copies. Equal documents give no changes.
func (d *Differ) Compare(res diff.Resource, old, new []byte) ([]Change, error) {
	out, _, err := d.compare(res, old, nil, new, nil, false)
	for i := range out { // compare's values alias the inputs
		out[i].Old, out[i].New = bytes.Clone(out[i].Old), bytes.Clone(out[i].New)
	}
	return out, err
}

// compare is Compare with optional prebuilt indexes of old and new (read only; each used when it
// is of that document, complete), and, when keepIndex is set, the index of new for a later
// comparison against new.
//
// The changes' values alias old and new, which must not be modified afterwards.
func (d *Differ) compare(res diff.Resource, old []byte, oldIdx *index, new []byte, newIdx *index, keepIndex bool) ([]Change, *index, error) {
	old, new = trim(old), trim(new)
	if len(old) == 0 || len(new) == 0 {
		return nil, nil, fmt.Errorf("%w: empty document", errSyntax)
	}
	w := d.walker(res, old, new)
	defer w.release()
	w.alias = true
	w.out = make([]Change, 0, 8)
	if oldIdx.indexes(old) {
		w.oi = oldIdx
	} else {
		w.oi = &w.obuf
		if err := w.oi.build(old); err != nil {
			return nil, nil, err
		}
	}
	given := newIdx.indexes(new)
	if given {
		w.ni = newIdx
	} else {
		w.ni = &w.nbuf
		if err := w.ni.build(new); err != nil {
			return nil, nil, err
		}
	}
	w.diffValue(old, new, false)
	if w.err != nil {
		return nil, nil, w.err
	}
	out := w.out
	w.out = nil
	var idx *index
	switch {
	case keepIndex && given:
		idx = newIdx
	case keepIndex:
		idx = &index{root: new, Layout: *w.ni.Clone()}
	}
	return out, idx, nil
}

// walker holds the state of one comparison or rewrite.
type walker struct {
	d    *Differ
	p    *plan
	path []byte // rendered path
	pat  []byte // pattern path (list items as [])
	out  []Change
	err  error
	// snapshot mode: rewrite drops stripPaths.
	strip bool
	// alias: change values may alias the inputs (internal callers whose inputs are immutable).
	alias bool
	// indexes of the old and new documents
	oi, ni     *index
	obuf, nbuf index // reused buffers behind oi and ni
}

var walkers = sync.Pool{New: func() any { return &walker{path: make([]byte, 0, 128), pat: make([]byte, 0, 128)} }}

func (d *Differ) walker(res diff.Resource, docs ...[]byte) *walker {
	if res == (diff.Resource{}) {
		for _, doc := range docs {
			if isSecret(doc) {
				res = secrets
				break
			}
		}
	}
	w := walkers.Get().(*walker)
	w.d, w.p = d, d.planFor(res)
	return w
}

func (w *walker) release() {
	w.d, w.p, w.out, w.err, w.strip, w.alias = nil, nil, nil, nil, false, false
	w.path, w.pat = w.path[:0], w.pat[:0]
	w.oi, w.ni = nil, nil
	w.obuf.root, w.nbuf.root = nil, nil
	walkers.Put(w)
}

// isSecret reports whether doc is a core/v1 Secret.
func isSecret(doc []byte) bool {
	kind, _ := lookupMember(doc, "kind", nil)
	if !bytes.Equal(kind, []byte(`"Secret"`)) {
		return false
	}
	av, _ := lookupMember(doc, "apiVersion", nil)
	return bytes.Equal(av, []byte(`"v1"`))
}

// lookupMember returns the raw value of the top-level member key of object obj.
func lookupMember(obj []byte, key string, x *index) ([]byte, bool) {
	obj = trim(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return nil, false
	}
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		ke, err := stringEnd(obj, i)
		if err != nil {
			return nil, false
		}
		k := obj[i:ke]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		i = skipSpace(obj, i+1)
		ve, err := valueEnd(obj, i, x)
		if err != nil {
			return nil, false
		}
		if keyIs(k, key) {
			return obj[i:ve], true
		}
		i = skipSpace(obj, ve)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil, false
}

// pushKey appends an object key to the paths; it returns the lengths to restore.
func (w *walker) pushKey(raw []byte) (int, int) {
	pl, ql := len(w.path), len(w.pat)
	if isIdent(raw) {
		if pl > 0 {
			w.path = append(w.path, '.')
		}
		if ql > 0 {
			w.pat = append(w.pat, '.')
		}
		w.path = append(w.path, raw[1:len(raw)-1]...)
		w.pat = append(w.pat, raw[1:len(raw)-1]...)
	} else {
		w.path = append(append(append(w.path, '['), raw...), ']')
		w.pat = append(append(append(w.pat, '['), raw...), ']')
	}
	return pl, ql
}

// pushIndex appends a positional list item.
func (w *walker) pushIndex(i int) (int, int) {
	pl, ql := len(w.path), len(w.pat)
	w.path = append(w.path, '[')
	w.path = strconv.AppendInt(w.path, int64(i), 10)
	w.path = append(w.path, ']')
	w.pat = append(w.pat, '[', ']')
	return pl, ql
}

// pushItem appends a list item matched by merge key.
func (w *walker) pushItem(key string, val []byte) (int, int) {
	pl, ql := len(w.path), len(w.pat)
	w.path = append(w.path, '[')
	w.path = append(w.path, key...)
	w.path = append(w.path, '=')
	if len(val) > 0 && val[0] == '"' && plainItemValue(val) {
		w.path = append(w.path, val[1:len(val)-1]...)
	} else {
		w.path = append(w.path, val...)
	}
	w.path = append(w.path, ']')
	w.pat = append(w.pat, '[', ']')
	return pl, ql
}

func (w *walker) pop(pl, ql int) { w.path, w.pat = w.path[:pl], w.pat[:ql] }

// isIdent reports whether a raw key is a plain identifier (ASCII letters, digits, _).
func isIdent(raw []byte) bool {
	if len(raw) < 3 {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// plainItemValue reports whether a raw string can be written unquoted in [key=value].
func plainItemValue(raw []byte) bool {
	if len(raw) < 3 {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		switch c {
		case '[', ']', '=', '"', '\\', ' ':
			return false
		}
	}
	return true
}

func (w *walker) ignored() bool {
	_, ok := w.d.ignore[string(w.pat)]
	return ok
}

func (w *walker) redactedHere() bool {
	_, ok := w.p.redact[string(w.pat)]
	return ok
}

func (w *walker) regexHere() bool {
	for _, re := range w.p.regexes {
		if re.Match(w.path) {
			return true
		}
	}
	return false
}

func isNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }

func (w *walker) diffValue(old, new []byte, red bool) {
	if w.err != nil || bytes.Equal(old, new) {
		return
	}
	ko, kn := kindOf(old), kindOf(new)
	if ko != kn {
		w.emit(OpReplace, old, new, red)
		return
	}
	switch ko {
	case '{':
		w.diffObject(old, new, red)
	case '[':
		w.diffArray(old, new, red)
	case '"':
		if unquote(old) != unquote(new) {
			w.emit(OpReplace, old, new, red)
		}
	case '0':
		if !numEqual(old, new) {
			w.emit(OpReplace, old, new, red)
		}
	default:
		w.emit(OpReplace, old, new, red)
	}
}

var memberPool = sync.Pool{New: func() any { s := make([]member, 0, 32); return &s }}

func (w *walker) diffObject(old, new []byte, red bool) {
	op, np := memberPool.Get().(*[]member), memberPool.Get().(*[]member)
	defer func() {
		*op, *np = (*op)[:0], (*np)[:0]
		memberPool.Put(op)
		memberPool.Put(np)
	}()
	var err error
	if *op, err = parseObject((*op)[:0], old, w.oi); err != nil {
		w.err = err
		return
	}
	if *np, err = parseObject((*np)[:0], new, w.ni); err != nil {
		w.err = err
		return
	}
	om, nm := *op, *np
	var matchedSmall [64]bool
	var matched []bool
	if len(om) <= len(matchedSmall) {
		matched = matchedSmall[:len(om)]
	} else {
		matched = make([]bool, len(om))
	}
	for j, m := range nm {
		i := findMember(om, m.key, j)
		pl, ql := w.pushKey(m.key)
		if i >= 0 {
			matched[i] = true
		}
		if !w.ignored() {
			childRed := red || w.redactedHere()
			switch {
			case i < 0 || isNull(om[i].val):
				if !isNull(m.val) {
					w.emit(OpAdd, nil, m.val, childRed)
				}
			case isNull(m.val):
				w.emit(OpRemove, om[i].val, nil, childRed)
			default:
				w.diffValue(om[i].val, m.val, childRed)
			}
		}
		w.pop(pl, ql)
	}
	for i, m := range om {
		if matched[i] || isNull(m.val) {
			continue
		}
		pl, ql := w.pushKey(m.key)
		if !w.ignored() {
			w.emit(OpRemove, m.val, nil, red || w.redactedHere())
		}
		w.pop(pl, ql)
	}
}

// findMember finds key in ms, trying index hint first (objects usually keep their key order).
func findMember(ms []member, key []byte, hint int) int {
	if hint < len(ms) && bytes.Equal(ms[hint].key, key) {
		return hint
	}
	for i := range ms {
		if bytes.Equal(ms[i].key, key) {
			return i
		}
	}
	return -1
}

// lastField returns the last field name of the pattern path.
func lastField(pat []byte) string {
	i := len(pat)
	for i > 0 && pat[i-1] != '.' && pat[i-1] != ']' {
		i--
	}
	if i < len(pat) {
		return string(pat[i:])
	}
	// ["key"] form
	if n := len(pat); n >= 4 && pat[n-1] == ']' && pat[n-2] == '"' {
		if k := bytes.LastIndex(pat, []byte(`["`)); k >= 0 {
			return unquote(pat[k+1 : n-1])
		}
	}
	return ""
}

// mergeKey picks the merge key of a list: the first candidate that every item of both lists has
// as a string or number, unique within each list. It returns the key and the items' key values.
func (w *walker) mergeKey(lists [][][]byte, xs []*index) (string, [][][]byte) {
	cands, ok := w.d.mergeByPath[string(w.pat)]
	if !ok {
		cands, ok = w.d.mergeByField[lastField(w.pat)]
	}
	if !ok {
		cands = genericMergeKeys
	}
	for _, key := range cands {
		vals := make([][][]byte, len(lists))
		good := true
		for li, items := range lists {
			vals[li] = make([][]byte, len(items))
			var seen map[string]struct{} // only for long lists; short ones are checked pairwise
			if len(items) > 16 {
				seen = make(map[string]struct{}, len(items))
			}
			for i, item := range items {
				if kindOf(item) != '{' {
					return "", nil
				}
				v, found := lookupMember(item, key, xs[li])
				if k := kindOf(v); !found || (k != '"' && k != '0') {
					good = false
					break
				}
				if seen != nil {
					if _, dup := seen[string(v)]; dup {
						good = false
						break
					}
					seen[string(v)] = struct{}{}
				} else {
					for _, prev := range vals[li][:i] {
						if bytes.Equal(prev, v) {
							good = false
							break
						}
					}
					if !good {
						break
					}
				}
				vals[li][i] = v
			}
			if !good {
				break
			}
		}
		if good {
			return key, vals
		}
	}
	return "", nil
}

func (w *walker) diffArray(old, new []byte, red bool) {
	oa, err := parseArray(nil, old, w.oi)
	if err != nil {
		w.err = err
		return
	}
	na, err := parseArray(nil, new, w.ni)
	if err != nil {
		w.err = err
		return
	}
	if key, vals := w.mergeKey([][][]byte{oa, na}, []*index{w.oi, w.ni}); key != "" {
		w.diffKeyed(key, oa, na, vals[0], vals[1], red)
		return
	}
	w.diffAligned(oa, na, red)
}

func (w *walker) diffKeyed(key string, oa, na, ok, nk [][]byte, red bool) {
	var index map[string]int // only for long lists
	if len(ok) > 16 {
		index = make(map[string]int, len(ok))
		for i, v := range ok {
			index[string(v)] = i
		}
	}
	find := func(v []byte) (int, bool) {
		if index != nil {
			i, found := index[string(v)]
			return i, found
		}
		for i, o := range ok {
			if bytes.Equal(o, v) {
				return i, true
			}
		}
		return 0, false
	}
	matched := make([]bool, len(oa))
	for j, item := range na {
		pl, ql := w.pushItem(key, nk[j])
		if i, found := find(nk[j]); found {
			matched[i] = true
			w.diffValue(oa[i], item, red)
		} else {
			w.emit(OpAdd, nil, item, red)
		}
		w.pop(pl, ql)
	}
	for i, item := range oa {
		if !matched[i] {
			pl, ql := w.pushItem(key, ok[i])
			w.emit(OpRemove, item, nil, red)
			w.pop(pl, ql)
		}
	}
}

var hashSeed = maphash.MakeSeed()

// hashValue hashes v in one call of the runtime's hash (maphash.Bytes makes one per 128 bytes).
func hashValue(v []byte) uint64 {
	return maphash.Comparable(hashSeed, unsafe.String(unsafe.SliceData(v), len(v)))
}

// diffAligned aligns two unkeyed lists: common head and tail, then a longest common subsequence
// of equal items (when the table fits MaxLCS); unmatched items between two aligned ones are
// compared pairwise, the rest are additions or removals.
func (w *walker) diffAligned(oa, na [][]byte, red bool) {
	head := 0
	for head < len(oa) && head < len(na) && bytes.Equal(oa[head], na[head]) {
		head++
	}
	tail := 0
	for tail < len(oa)-head && tail < len(na)-head && bytes.Equal(oa[len(oa)-1-tail], na[len(na)-1-tail]) {
		tail++
	}
	om, nm := oa[head:len(oa)-tail], na[head:len(na)-tail]
	// anchors are pairs (i, j) of equal items in om, nm, increasing in both.
	var anchors [][2]int
	if n, m := len(om), len(nm); n > 0 && m > 0 && n*m <= w.d.maxLCS {
		anchors = lcs(om, nm)
	}
	anchors = append(anchors, [2]int{len(om), len(nm)}) // sentinel
	i, j := 0, 0
	for _, a := range anchors {
		for i < a[0] && j < a[1] {
			pl, ql := w.pushIndex(head + j)
			w.diffValue(om[i], nm[j], red)
			w.pop(pl, ql)
			i++
			j++
		}
		for ; i < a[0]; i++ {
			pl, ql := w.pushIndex(head + i)
			w.emit(OpRemove, om[i], nil, red)
			w.pop(pl, ql)
		}
		for ; j < a[1]; j++ {
			pl, ql := w.pushIndex(head + j)
			w.emit(OpAdd, nil, nm[j], red)
			w.pop(pl, ql)
		}
		i, j = a[0]+1, a[1]+1
	}
}

// lcs returns the index pairs of a longest common subsequence of equal items.
func lcs(a, b [][]byte) [][2]int {
	ha := make([]uint64, len(a))
	hb := make([]uint64, len(b))
	for i, v := range a {
		ha[i] = hashValue(v)
	}
	for j, v := range b {
		hb[j] = hashValue(v)
	}
	eq := func(i, j int) bool { return ha[i] == hb[j] && bytes.Equal(a[i], b[j]) }
	n, m := len(a), len(b)
	// t[i][j] = LCS length of a[i:], b[j:]
	t := make([]int32, (n+1)*(m+1))
	at := func(i, j int) int32 { return t[i*(m+1)+j] }
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case eq(i, j):
				t[i*(m+1)+j] = at(i+1, j+1) + 1
			case at(i+1, j) >= at(i, j+1):
				t[i*(m+1)+j] = at(i+1, j)
			default:
				t[i*(m+1)+j] = at(i, j+1)
			}
		}
	}
	var out [][2]int
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case eq(i, j):
			out = append(out, [2]int{i, j})
			i++
			j++
		case at(i+1, j) >= at(i, j+1):
			i++
		default:
			j++
		}
	}
	return out
}

// numEqual compares two JSON numbers by value.
func numEqual(a, b []byte) bool {
	if x, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		if y, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return x == y
		}
	}
	var ra, rb big.Rat
	if _, ok := ra.SetString(string(a)); !ok {
		return false
	}
	if _, ok := rb.SetString(string(b)); !ok {
		return false
	}
	return ra.Cmp(&rb) == 0
}

func (w *walker) emit(op op, old, new []byte, red bool) {
	if !red && w.p.anyRegex && w.regexHere() {
		red = true
	}
	c := Change{Path: string(w.path), Op: op, Redacted: red}
	if old != nil {
		c.Old = w.value(old, red)
	}
	if new != nil {
		c.New = w.value(new, red)
	}
	w.out = append(w.out, c)
}

// value copies v for output, hiding what redaction covers.
func (w *walker) value(v []byte, red bool) json.RawMessage {
	if red {
		return w.marker(nil, v)
	}
	if w.mayDescend() {
		return w.rewrite(make([]byte, 0, len(v)), v, false)
	}
	if w.alias {
		return v
	}
	return bytes.Clone(v)
}

var markerPrefix = []byte(`"<redacted:`)

// marker appends the redaction marker of v to dst. A marker is kept as it is.
func (w *walker) marker(dst, v []byte) []byte {
	if bytes.HasPrefix(v, markerPrefix) {
		return append(dst, v...)
	}
	m := hmac.New(sha256.New, w.d.hmacKey)
	m.Write(v)
	var sum [sha256.Size]byte
	dst = append(dst, markerPrefix...)
	dst = hex.AppendEncode(dst, m.Sum(sum[:0])[:6])
	return append(dst, '>', '"')
}

// mayDescend reports whether a redaction or strip rule may apply at or below the current path.
func (w *walker) mayDescend() bool {
	if w.p.anyRegex {
		return true
	}
	_, ok := w.p.descend[string(w.pat)]
	if !ok {
		_, ok = w.p.redact[string(w.pat)]
	}
	return ok
}
