package objdiff

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/telemetry"
)

// fixtureObjects returns the response bodies of the recorded rollout scenario's audit log that
// are objects, in log order.
func fixtureObjects(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(fixture.Path(t, "rollout", "audit.jsonl"))
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

// brackets calls fn with the offset and byte of every '{', '[', '}' and ']' of doc outside
// strings.
func brackets(t *testing.T, doc []byte, fn func(i int, c byte)) {
	t.Helper()
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '"':
			end, err := stringEnd(doc, i)
			require.NoError(t, err)
			i = end - 1
		case '{', '[', '}', ']':
			fn(i, c)
		}
	}
}

// record records the Layout of doc the way a scanner that reads it does: Open at every '{' and
// '[', Close at every '}' and ']'.
func record(t *testing.T, doc []byte, l *Layout) {
	t.Helper()
	brackets(t, doc, func(i int, c byte) {
		if c == '{' || c == '[' {
			l.Open(i)
		} else {
			l.Close(i)
		}
	})
}

// TestLayoutRecordedMatchesScan: a Layout recorded with Open and Close while reading a document
// (as the audit decoder records a body) is the one LayoutOf finds, small containers left out.
func TestLayoutRecordedMatchesScan(t *testing.T) {
	var l Layout
	kept, left := 0, 0
	for _, doc := range fixtureObjects(t) {
		want, err := LayoutOf(doc)
		require.NoError(t, err)
		l.Reset()
		record(t, doc, &l)
		require.True(t, l.Finish(len(doc)))
		require.True(t, want.Equal(&l))
		require.True(t, want.Equal(l.Clone()))
		kept += len(want.opens)
		// Every container of at least minIndexed bytes is recorded with its end, every shorter
		// one is left out.
		x := index{root: doc, Layout: *want}
		brackets(t, doc, func(i int, c byte) {
			if c != '{' && c != '[' {
				return
			}
			ce, err := containerEnd(doc, i)
			require.NoError(t, err)
			got, ok := x.end(doc, i)
			if ce-i >= minIndexed {
				require.True(t, ok, "container at %d of %d bytes", i, ce-i)
				require.Equal(t, ce, got)
			} else {
				require.False(t, ok)
				left++
			}
		})
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
		d, err := New(diff.Options{})
		require.NoError(t, err)
		want, _, err := d.compare(diff.Resource{}, []byte(`{"a":[]}`), nil, doc, nil, false)
		require.NoError(t, err)
		changes, _, err := d.compare(diff.Resource{}, []byte(`{"a":[]}`), nil, doc, &index{root: doc, Layout: l}, false)
		require.NoError(t, err, name)
		assert.Equal(t, want, changes, name)
	}
	var l Layout
	record(t, doc, &l)
	require.True(t, l.Finish(len(doc)))
	assert.False(t, l.usableFor(doc[:len(doc)-1]), "another length")
	assert.True(t, l.usableFor(doc))
}

// TestCompareWithLayout: a comparison given the new document's recorded Layout finds the same
// changes as one that scans it, for consecutive versions of the fixture's objects; a Layout of
// another document of the same length makes no panic.
func TestCompareWithLayout(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	docs := fixtureObjects(t)
	compared := 0
	for i := 1; i < len(docs); i++ {
		old, new := docs[i-1], docs[i]
		want, _, err := d.compare(diff.Resource{}, old, nil, new, nil, false)
		if err != nil {
			continue
		}
		lay, err := LayoutOf(new)
		require.NoError(t, err)
		got, idx, err := d.compare(diff.Resource{}, old, nil, new, indexOf(new, lay), true)
		require.NoError(t, err)
		require.Equal(t, want, got)
		// The kept index is the given Layout, not a copy.
		require.Same(t, &lay.opens[0], &idx.opens[0])
		compared++

		// Wrong but complete: the Layout of old with new's length.
		wrong, err := LayoutOf(old)
		require.NoError(t, err)
		wrong.size = len(new)
		_, _, _ = d.compare(diff.Resource{}, old, nil, new, indexOf(new, wrong), false)
	}
	assert.Greater(t, compared, 100)
}

// TestLayoutCut: the Layout of a document with a member cut out (SnapshotKnownLayout's managed
// fields) or its surrounding whitespace trimmed is the one a scan of the result finds.
func TestLayoutCut(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	res := diff.Resource{Resource: "pods"}
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
	_, none, err := d.SnapshotKnownLayout(diff.Resource{Resource: "secrets"}, secret, ManagedFields{Absent: true}, lay)
	require.NoError(t, err)
	assert.Nil(t, none)
}

// assertIndexRight checks that every container x records is one of x.root, with its right end.
func assertIndexRight(t *testing.T, x *index) {
	t.Helper()
	require.NotNil(t, x)
	for i, o := range x.opens {
		c := x.root[o]
		require.True(t, c == '{' || c == '[', "entry %d at %d: %q", i, o, c)
		end, err := containerEnd(x.root, int(o))
		require.NoError(t, err)
		require.Equal(t, end-1, int(x.closes[i]), "entry %d at %d", i, o)
	}
}

// TestLayoutSpliced: the index of a document edited by replacePath (a binding's spec.nodeName,
// a scale's spec.replicas and resourceVersion, members that are missing and objects created on
// the way) is derived from the index of the original: what it records is right, and
// comparisons against the edited document find the same with it as without it.
func TestLayoutSpliced(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	docs := fixtureObjects(t)
	edits := []struct {
		val  string
		keys []string
	}{
		{`"node-1"`, []string{"spec", "nodeName"}},
		{`"a-much-longer-node-name-than-before-0123456789"`, []string{"spec", "nodeName"}},
		{`7`, []string{"spec", "replicas"}},
		{`"123456789"`, []string{"metadata", "resourceVersion"}},
		{`{"a":"an object of more than sixty-four bytes, so that it would be indexed"}`, []string{"status", "new", "deeper"}},
		{`"x"`, []string{"metadata"}},
	}
	kept := 0
	for i, doc := range docs {
		x := &index{}
		require.NoError(t, x.build(doc))
		for _, e := range edits {
			out, _, _, sp, err := replacePath(doc, x, []byte(e.val), e.keys...)
			require.NoError(t, err)
			want, _, _, _, err := replacePath(doc, nil, []byte(e.val), e.keys...)
			require.NoError(t, err)
			require.Equal(t, string(want), string(out), "the index only speeds the search up")
			y := x.spliced(out, sp)
			assertIndexRight(t, y)
			kept += len(y.opens)
			if i+1 < len(docs) {
				next := docs[i+1]
				wantChanges, _, err := d.compare(diff.Resource{}, out, nil, next, nil, false)
				require.NoError(t, err)
				gotChanges, _, err := d.compare(diff.Resource{}, out, y, next, nil, false)
				require.NoError(t, err)
				require.Equal(t, wantChanges, gotChanges)
			}
		}
	}
	assert.Greater(t, kept, 1000)
	// An edit that does not match the document, or a document with surrounding space, gets no
	// index.
	x := &index{}
	require.NoError(t, x.build(docs[0]))
	assert.Nil(t, x.spliced(docs[0], splice{0, 0, 3}))
	padded := append([]byte(" "), docs[0]...)
	require.NoError(t, x.build(padded))
	assert.Nil(t, x.spliced(padded, splice{}))
	assert.Nil(t, (*index)(nil).spliced(docs[0], splice{}))
}

// TestStreamKeepsLayouts: a Stream given the snapshots' Layouts keeps each version with an
// index, the creation's included, and a binding's version gets one derived from the last; the
// diffs are those a Stream without Layouts finds.
func TestStreamKeepsLayouts(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	with, err := NewStream(diff.StreamConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	without, err := NewStream(diff.StreamConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	res := diff.Resource{Resource: "pods"}
	write := func(verb, sub string, body []byte, rv string, layout bool) Write {
		w := Write{Object: pod, Verb: verb, Subresource: sub, Response: body, IsObject: sub != "binding", ResourceVersion: rv, Time: at}
		if sub == "binding" {
			w.Request = []byte(`{"kind":"Binding","apiVersion":"v1","metadata":{"name":"p"},"target":{"kind":"Node","name":"node-1"}}`)
			w.Response = []byte(`{"kind":"Status","status":"Success"}`)
			return w
		}
		snap, err := with.Differ().Snapshot(res, body)
		require.NoError(t, err)
		w.Snapshot = snap
		if layout {
			lay, err := LayoutOf(snap)
			require.NoError(t, err)
			w.SnapshotLayout = lay
		}
		return w
	}
	long := strings.Repeat("x", 80) // containers long enough to be indexed
	steps := []struct {
		verb, sub string
		body      []byte
		rv        string
	}{
		{"create", "", podBody("1", "", long), "1"},
		{"create", "binding", nil, ""},
		{"patch", "status", podBody("3", "node-1", "Running"+long), "3"},
		{"update", "", podBody("4", "node-2", "Running"+long), "4"},
	}
	for _, st := range steps {
		got := with.Observe(ctx, write(st.verb, st.sub, st.body, st.rv, true))
		want := without.Observe(ctx, write(st.verb, st.sub, st.body, st.rv, false))
		require.Equal(t, want, got, "%s %s", st.verb, st.sub)
		v, ok := with.cache.Peek(pod.Key())
		require.True(t, ok)
		require.NotNil(t, v.idx, "%s %s", st.verb, st.sub)
		assert.True(t, v.idx.indexes(v.body))
		assertIndexRight(t, v.idx)
		assert.NotEmpty(t, v.idx.opens)
	}
}
