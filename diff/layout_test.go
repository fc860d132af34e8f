package diff

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureObjects returns the response bodies of the recorded rollout scenario's audit log that
// are objects, in log order.
func fixtureObjects(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out [][]byte
	for sc.Scan() {
		var ev struct {
			ResponseObject json.RawMessage `json:"responseObject"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev))
		if len(ev.ResponseObject) > 0 && ev.ResponseObject[0] == '{' {
			out = append(out, ev.ResponseObject)
		}
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(out), 100)
	return out
}

// record records the Layout of doc the way a scanner that reads it does: Open at every '{' and
// '[' and Close at every '}' and ']' outside strings, offsets from base.
func record(t *testing.T, doc []byte, base int, l *Layout) {
	t.Helper()
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			end, err := stringEnd(doc, i)
			require.NoError(t, err)
			i = end - 1
		case '{', '[':
			l.Open(base + i)
		case '}', ']':
			l.Close(base + i)
		}
	}
}

// TestLayoutRecordedMatchesScan: a Layout recorded with Open and Close while reading a document
// (here at an offset, as the audit decoder records a body inside its batch) is the one LayoutOf
// finds, small containers left out; it is read back by the same look-ups.
func TestLayoutRecordedMatchesScan(t *testing.T) {
	var l Layout
	kept, left := 0, 0
	for _, doc := range fixtureObjects(t) {
		want, err := LayoutOf(doc)
		require.NoError(t, err)
		l.Reset()
		record(t, doc, 0, &l)
		require.True(t, l.Finish(len(doc)))
		require.True(t, want.Equal(&l))
		require.True(t, want.Equal(l.Clone()))
		kept += len(want.opens)
		// Every recorded container is at least minIndexed long, and every container left out is
		// shorter.
		var all index
		all.root = doc
		for i := 0; i < len(doc); i++ {
			switch doc[i] {
			case '"':
				end, err := stringEnd(doc, i)
				require.NoError(t, err)
				i = end - 1
			case '{', '[':
				ce, err := containerEnd(doc, i)
				require.NoError(t, err)
				x := index{root: doc, Layout: *want}
				got, ok := x.end(doc, i)
				if ce-i >= minIndexed {
					require.True(t, ok, "container at %d of %d bytes", i, ce-i)
					require.Equal(t, ce, got)
				} else {
					require.False(t, ok)
					left++
				}
			}
		}
	}
	assert.Greater(t, kept, 1000)
	assert.Greater(t, left, kept, "small containers are most of them")
}

// TestLayoutIncomplete: a recording that does not balance, or that names offsets outside the
// document, is not used; nothing panics.
func TestLayoutIncomplete(t *testing.T) {
	doc := []byte(`{"a":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26]}`)
	for name, rec := range map[string]func(l *Layout){
		"close without open": func(l *Layout) { l.Close(5) },
		"unclosed":           func(l *Layout) { l.Open(0); l.Open(5) },
		"negative":           func(l *Layout) { l.Open(-1); l.Close(len(doc) - 1) },
		"close before open":  func(l *Layout) { l.Open(40); l.Close(3) },
		"past the end":       func(l *Layout) { l.Open(0); l.Close(len(doc) + 70) },
		"small parent of a large child": func(l *Layout) {
			l.Open(0)
			l.Open(2)
			l.Close(70)
			l.Close(10)
		},
	} {
		var l Layout
		rec(&l)
		assert.False(t, l.Finish(len(doc)), name)
		assert.False(t, l.usableFor(doc), name)
		// compare ignores it and scans.
		d, err := New(Options{})
		require.NoError(t, err)
		want, _, err := d.compare(Resource{}, []byte(`{"a":[]}`), nil, doc, nil, false)
		require.NoError(t, err)
		changes, _, err := d.compare(Resource{}, []byte(`{"a":[]}`), nil, doc, &index{root: doc, Layout: l}, false)
		require.NoError(t, err, name)
		assert.Equal(t, want, changes, name)
	}
	var l Layout
	record(t, doc, 0, &l)
	require.True(t, l.Finish(len(doc)))
	assert.False(t, l.usableFor(doc[:len(doc)-1]), "another length")
	assert.True(t, l.usableFor(doc))
}

// TestCompareWithLayout: a comparison given the new document's recorded Layout finds the same
// changes as one that scans it, for consecutive versions of the fixture's objects; a Layout of
// another document of the same length makes no panic.
func TestCompareWithLayout(t *testing.T) {
	d, err := New(Options{})
	require.NoError(t, err)
	docs := fixtureObjects(t)
	compared := 0
	for i := 1; i < len(docs); i++ {
		old, new := docs[i-1], docs[i]
		want, _, err := d.compare(Resource{}, old, nil, new, nil, false)
		if err != nil {
			continue
		}
		lay, err := LayoutOf(new)
		require.NoError(t, err)
		got, idx, err := d.compare(Resource{}, old, nil, new, indexOf(new, lay), true)
		require.NoError(t, err)
		require.Equal(t, want, got)
		// The kept index is the given Layout, not a copy.
		require.Same(t, &lay.opens[0], &idx.opens[0])
		compared++

		// Wrong but complete: the Layout of old with new's length.
		wrong, err := LayoutOf(old)
		require.NoError(t, err)
		wrong.size = len(new)
		_, _, _ = d.compare(Resource{}, old, nil, new, indexOf(new, wrong), false)
	}
	assert.Greater(t, compared, 100)
}

// TestLayoutCut: the Layout of a document with a member cut out (SnapshotKnownLayout's managed
// fields) or its surrounding whitespace trimmed is the one a scan of the result finds.
func TestLayoutCut(t *testing.T) {
	d, err := New(Options{})
	require.NoError(t, err)
	res := Resource{Resource: "pods"}
	cut := 0
	for _, doc := range fixtureObjects(t) {
		for _, padded := range [][]byte{doc, append(append([]byte(" \n"), doc...), "\t "...)} {
			lay, err := LayoutOf(padded)
			require.NoError(t, err)
			mf := ManagedFields{Absent: true}
			meta, ok := memberStart(trim(padded), "metadata")
			require.True(t, ok)
			lead := len(padded) - len(trimLeft(padded))
			if fs, fe, ok := memberExtent(trim(padded)[meta:], "managedFields"); ok {
				mf = ManagedFields{Start: lead + meta + fs, End: lead + meta + fe}
				cut++
			}
			snap, snapLay, err := d.SnapshotKnownLayout(res, padded, mf, lay)
			require.NoError(t, err)
			want, err := d.Snapshot(res, padded)
			require.NoError(t, err)
			require.Equal(t, string(want), string(snap))
			require.NotNil(t, snapLay)
			wantLay, err := LayoutOf(snap)
			require.NoError(t, err)
			require.True(t, wantLay.Equal(snapLay), "%s", snap)
			if mf.Absent && len(padded) == len(doc) {
				assert.Same(t, lay, snapLay, "nothing cut: the caller's Layout")
			}
			// Without a Layout, or with one of another document, the snapshot has none.
			_, none, err := d.SnapshotKnownLayout(res, padded, mf, nil)
			require.NoError(t, err)
			assert.Nil(t, none)
			other := *lay
			other.size++
			_, none, err = d.SnapshotKnownLayout(res, padded, mf, &other)
			require.NoError(t, err)
			assert.Nil(t, none)
		}
	}
	assert.Greater(t, cut, 50)
	// A resource whose snapshot is rewritten (a Secret) gets no Layout.
	secret := []byte(secretV1)
	lay, err := LayoutOf(secret)
	require.NoError(t, err)
	_, none, err := d.SnapshotKnownLayout(Resource{Resource: "secrets"}, secret, ManagedFields{Absent: true}, lay)
	require.NoError(t, err)
	assert.Nil(t, none)
}
