package query

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
)

func TestParsePath(t *testing.T) {
	f := func(name string) pathSeg { return pathSeg{kind: segField, field: name} }
	cases := map[string][]pathSeg{
		"":  nil,
		".": nil,
		`metadata.labels["app.kubernetes.io/name"]`: {f("metadata"), f("labels"), f("app.kubernetes.io/name")},
		"spec.containers[name=app].ports[containerPort=80].protocol": {f("spec"), f("containers"),
			{kind: segMatch, field: "name", value: "app"}, f("ports"), {kind: segMatch, field: "containerPort", value: "80"}, f("protocol")},
		`spec.x[key="a ]b"].y`: {f("spec"), f("x"), {kind: segMatch, field: "key", value: "a ]b"}, f("y")},
		"args[3]":              {f("args"), {kind: segIndex, index: 3}},
		`a["q\"]"][0][1]`:      {f("a"), f(`q"]`), {kind: segIndex, index: 0}, {kind: segIndex, index: 1}},
	}
	for in, want := range cases {
		got, err := parsePath(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"a[", "a[x", `a["x"`, `a["x`, "a..b", "a[-1]", "a.", "a[=x]", `a[k="x`, "a[k=x"} {
		_, err := parsePath(bad)
		assert.ErrorIs(t, err, errBadPath, bad)
	}
}

func decodeDoc(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// TestApplyWriteLists: an unkeyed list's removals use old indexes and its additions new ones;
// a keyed list's new item goes before the next item the write changed.
func TestApplyWriteLists(t *testing.T) {
	doc := decodeDoc(t, `{"args":["a","b","c","d"],"conditions":[{"type":"B","s":"1"},{"type":"C","s":"1"}]}`)
	w := historyWrite{}
	for _, c := range []struct{ path, op, new string }{
		{"args[1]", "remove", ""}, // b
		{"args[1]", "add", `"x"`}, // a x c ...
		{"args[2]", "replace", `"C"`},
		{"args[3]", "remove", ""}, // d
		{"args[3]", "add", `"y"`},
		{"conditions[type=A]", "add", `{"type":"A","s":"0"}`},
		{"conditions[type=B].s", "replace", `"2"`},
	} {
		attrs := []struct{ k, v string }{{"kelemetry.diff.path", c.path}, {"kelemetry.diff.op", c.op}}
		if c.new != "" {
			attrs = append(attrs, struct{ k, v string }{"kelemetry.diff.new", c.new})
		}
		l := diffLog(attrs)
		w.logs = append(w.logs, l)
	}
	var gaps []string
	var unordered []string
	got, n := applyWrite(doc, w, func(path, msg string) { gaps = append(gaps, path+": "+msg) }, func(p string) { unordered = append(unordered, p) })
	assert.Empty(t, gaps)
	assert.Empty(t, unordered)
	assert.Equal(t, 7, n)
	b, _ := json.Marshal(got)
	assert.JSONEq(t, `{"args":["a","x","C","y"],"conditions":[{"type":"A","s":"0"},{"type":"B","s":"2"},{"type":"C","s":"1"}]}`, string(b))
}

// TestApplyWriteBad: changes that do not fit the document are gaps, never a panic.
func TestApplyWriteBad(t *testing.T) {
	doc := decodeDoc(t, `{"a":1,"l":[1,2],"m":{"x":"y"}}`)
	w := historyWrite{}
	for _, c := range [][2]string{
		{"a.b", "replace"}, {"l[9]", "replace"}, {"l[k=v].x", "replace"}, {"m[0]", "replace"}, {"l.x", "replace"},
		{"nope.x", "add"}, {"a[", "add"}, {"l[0]", "bogus"}, {"m.x.y", "add"},
	} {
		w.logs = append(w.logs, diffLog([]struct{ k, v string }{{"kelemetry.diff.path", c[0]}, {"kelemetry.diff.op", c[1]},
			{"kelemetry.diff.new", "1"}}))
	}
	var gaps []string
	_, n := applyWrite(doc, w, func(path, msg string) { gaps = append(gaps, path) }, func(string) {})
	assert.Equal(t, 0, n)
	assert.Len(t, gaps, 9, "%v", gaps)
}

func FuzzApplyPath(f *testing.F) {
	for _, s := range []string{"a.b", `m["k"]`, "l[0]", "l[name=x].y", `l[k="a"]`, "[", "a..", "l[99999999999999999999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		segs, err := parsePath(path)
		if err != nil {
			return
		}
		for _, op := range []string{"add", "remove", "replace"} {
			doc := decodeDoc(t, `{"a":{"b":1},"l":[{"name":"x","y":1},2],"m":{"k":"v"}}`)
			blind := false
			_, _ = applyOp(doc, segs, op, "v", &blind)
		}
	})
}

func diffLog(attrs []struct{ k, v string }) aggregator.Log {
	l := aggregator.Log{Type: aggregator.LogTypeDiff}
	for _, a := range attrs {
		l.Attributes = append(l.Attributes, aggregator.Attr{Key: a.k, Value: a.v})
	}
	return l
}
