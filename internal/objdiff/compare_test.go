package objdiff

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lines(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

func TestCompare(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		opts     diff.Options
		want     []string
	}{
		{name: "equal", old: `{"a":1}`, new: `{"a":1}`, want: []string{}},
		{name: "equal with other key order and spacing", old: `{"a":1,"b":[1,2]}`, new: `{ "b": [1, 2], "a": 1 }`, want: []string{}},
		{name: "scalar", old: `{"spec":{"replicas":2}}`, new: `{"spec":{"replicas":4}}`, want: []string{"spec.replicas 2 -> 4"}},
		{name: "numbers by value", old: `{"a":1,"b":1e2,"c":0.5,"d":12345678901234567890}`, new: `{"a":1.0,"b":100,"c":5e-1,"d":12345678901234567890.0}`, want: []string{}},
		{name: "number changed", old: `{"a":1}`, new: `{"a":1.5}`, want: []string{"a 1 -> 1.5"}},
		{name: "strings by content", old: `{"a":"A"}`, new: `{"a":"\u0041"}`, want: []string{}},
		{name: "nested maps", old: `{"metadata":{"labels":{"app":"web","tier":"fe"}}}`,
			new:  `{"metadata":{"labels":{"app":"web","app.kubernetes.io/name":"web","tier":"be"}}}`,
			want: []string{`metadata.labels["app.kubernetes.io/name"] <none> -> web`, "metadata.labels.tier fe -> be"}},
		{name: "removed key", old: `{"a":{"b":1,"c":2}}`, new: `{"a":{"b":1}}`, want: []string{"a.c 2 -> <none>"}},
		{name: "null is absent", old: `{"a":null,"b":1}`, new: `{"b":1,"c":null}`, want: []string{}},
		{name: "type change", old: `{"a":"1"}`, new: `{"a":1}`, want: []string{`a "1" -> 1`}},
		{name: "type change object to list", old: `{"a":{"x":1}}`, new: `{"a":[1]}`, want: []string{`a {"x":1} -> [1]`}},
		{name: "null to value", old: `{"a":null}`, new: `{"a":{"x":1}}`, want: []string{`a <none> -> {"x":1}`}},
		{name: "keyed list reorder is no change", old: `{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}`,
			new: `{"containers":[{"name":"b","image":"y"},{"name":"a","image":"x"}]}`, want: []string{}},
		{name: "keyed list insert at head", old: `{"spec":{"containers":[{"name":"a","image":"x"}]}}`,
			new:  `{"spec":{"containers":[{"name":"sidecar","image":"s"},{"name":"a","image":"x2"}]}}`,
			want: []string{`spec.containers[name=sidecar] <none> -> {"name":"sidecar","image":"s"}`, "spec.containers[name=a].image x -> x2"}},
		{name: "keyed list removal", old: `{"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}`, new: `{"env":[{"name":"B","value":"2"}]}`,
			want: []string{`env[name=A] {"name":"A","value":"1"} -> <none>`}},
		{name: "ports by containerPort", old: `{"ports":[{"containerPort":80,"protocol":"TCP"}]}`, new: `{"ports":[{"containerPort":80,"protocol":"UDP"},{"containerPort":443}]}`,
			want: []string{"ports[containerPort=80].protocol TCP -> UDP", `ports[containerPort=443] <none> -> {"containerPort":443}`}},
		{name: "conditions by type", old: `{"status":{"conditions":[{"type":"Available","status":"False"},{"type":"Progressing","status":"True"}]}}`,
			new:  `{"status":{"conditions":[{"type":"Progressing","status":"True"},{"type":"Available","status":"True"}]}}`,
			want: []string{"status.conditions[type=Available].status False -> True"}},
		{name: "generic name key", old: `{"things":[{"name":"a","v":1},{"name":"b","v":1}]}`, new: `{"things":[{"name":"b","v":2},{"name":"a","v":1}]}`,
			want: []string{"things[name=b].v 1 -> 2"}},
		{name: "duplicate keys fall back to position", old: `{"things":[{"name":"a","v":1},{"name":"a","v":2}]}`, new: `{"things":[{"name":"a","v":1},{"name":"a","v":3}]}`,
			want: []string{"things[1].v 2 -> 3"}},
		{name: "primitive insert at head", old: `{"args":["a","b","c"]}`, new: `{"args":["z","a","b","c"]}`, want: []string{"args[0] <none> -> z"}},
		{name: "primitive reorder", old: `{"args":["a","b","c"]}`, new: `{"args":["c","a","b"]}`, want: []string{"args[0] <none> -> c", "args[2] c -> <none>"}},
		{name: "primitive change in middle", old: `{"args":["a","b","c"]}`, new: `{"args":["a","x","c"]}`, want: []string{"args[1] b -> x"}},
		{name: "unkeyed objects paired by position", old: `{"rules":[{"verbs":["get"]},{"verbs":["list"]}]}`, new: `{"rules":[{"verbs":["get"]},{"verbs":["list","watch"]}]}`,
			want: []string{"rules[1].verbs[1] <none> -> watch"}},
		{name: "ignored by default", old: `{"metadata":{"resourceVersion":"1","generation":1,"managedFields":[{"manager":"a"}],"name":"x"}}`,
			new: `{"metadata":{"resourceVersion":"2","generation":2,"managedFields":[{"manager":"b"}],"name":"x"}}`, want: []string{}},
		{name: "ignore nothing", opts: diff.Options{Ignore: []string{}}, old: `{"metadata":{"resourceVersion":"1"}}`, new: `{"metadata":{"resourceVersion":"2"}}`,
			want: []string{`metadata.resourceVersion "1" -> "2"`}},
		{name: "custom ignore with list wildcard", opts: diff.Options{Ignore: []string{"status.conditions[*].lastProbeTime"}},
			old:  `{"status":{"conditions":[{"type":"A","lastProbeTime":"t1","status":"True"}]}}`,
			new:  `{"status":{"conditions":[{"type":"A","lastProbeTime":"t2","status":"False"}]}}`,
			want: []string{"status.conditions[type=A].status True -> False"}},
		{name: "custom merge key by path", opts: diff.Options{MergeKeys: map[string][]string{"spec.items": {"id"}}},
			old: `{"spec":{"items":[{"id":1,"v":"a"},{"id":2,"v":"b"}]}}`, new: `{"spec":{"items":[{"id":2,"v":"c"},{"id":1,"v":"a"}]}}`,
			want: []string{"spec.items[id=2].v b -> c"}},
		{name: "quoted item values", old: `{"env":[{"name":"A B","value":"1"}]}`, new: `{"env":[{"name":"A B","value":"2"}]}`,
			want: []string{`env[name="A B"].value "1" -> "2"`}},
		{name: "root type change", old: `{"a":1}`, new: `[1]`, want: []string{`. {"a":1} -> [1]`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Compare([]byte(tt.old), []byte(tt.new), tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, lines(got))
		})
	}
}

func TestCompareOps(t *testing.T) {
	got, err := Compare([]byte(`{"a":1,"b":2}`), []byte(`{"a":3,"c":4}`), diff.Options{})
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, Change{Path: "a", Op: OpReplace, Old: json.RawMessage("1"), New: json.RawMessage("3")}, got[0])
	assert.Equal(t, Change{Path: "c", Op: OpAdd, New: json.RawMessage("4")}, got[1])
	assert.Equal(t, Change{Path: "b", Op: OpRemove, Old: json.RawMessage("2")}, got[2])
	b, err := json.Marshal(got[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"path":"a","op":"replace","old":1,"new":3}`, string(b))
}

func TestCompareValues(t *testing.T) {
	got, err := compareValues(map[string]any{"n": 1}, map[string]any{"n": 1.0, "s": "x"}, diff.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"s <none> -> x"}, lines(got))
}

func TestCompareErrors(t *testing.T) {
	for _, bad := range []string{``, `{"a":`, `{"a":1`, `{"a" 1}`, `{"a":"x}`, `{"a":[1,}`} {
		_, err := Compare([]byte(bad), []byte(`{"a":2}`), diff.Options{})
		assert.Error(t, err, bad)
	}
	_, err := Compare([]byte(`{}`), []byte(`{}`), diff.Options{Redact: []diff.RedactRule{{Resource: "a/b/c", Paths: []string{"x"}}}})
	assert.Error(t, err)
	_, err = Compare([]byte(`{}`), []byte(`{}`), diff.Options{Redact: []diff.RedactRule{{PathRegex: "("}}})
	assert.Error(t, err)
}

const secretV1 = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","managedFields":[{"manager":"kubectl"}]},"data":{"password":"aHVudGVyMg==","user":"YWRtaW4="},"stringData":{"token":"t0p"}}`
const secretV2 = `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"c2VjcmV0","user":"YWRtaW4=","extra":"eA=="}}`

func TestRedactSecrets(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	for _, res := range []diff.Resource{{}, {Resource: "secrets"}} {
		got, err := d.Compare(res, []byte(secretV1), []byte(secretV2))
		require.NoError(t, err)
		all := strings.Join(lines(got), "\n")
		for _, clear := range []string{"aHVudGVyMg==", "c2VjcmV0", "YWRtaW4=", "eA==", "t0p"} {
			assert.NotContains(t, all, clear)
		}
		paths := map[string]Change{}
		for _, c := range got {
			paths[c.Path] = c
			assert.True(t, c.Redacted, c.Path)
		}
		assert.Contains(t, paths, "data.password")
		assert.Contains(t, paths, "data.extra")
		assert.Contains(t, paths, "stringData")
		assert.NotContains(t, paths, "data.user", "an unchanged secret value is no change")
		assert.Contains(t, paths["data.password"].Line(0), "<redacted:")
	}

	snap, err := d.Snapshot(diff.Resource{}, []byte(secretV1))
	require.NoError(t, err)
	assert.NotContains(t, string(snap), "aHVudGVyMg==")
	assert.NotContains(t, string(snap), "t0p")
	assert.NotContains(t, string(snap), "managedFields")
	assert.Contains(t, string(snap), `"password":"<redacted:`)
	assert.True(t, json.Valid(snap), string(snap))

	// Snapshots compare like the bodies.
	snap2, err := d.Snapshot(diff.Resource{}, []byte(secretV2))
	require.NoError(t, err)
	got, err := d.Compare(diff.Resource{}, snap, snap2)
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func TestRedactRules(t *testing.T) {
	d, err := New(diff.Options{Redact: []diff.RedactRule{
		{Resource: "configmaps", Paths: []string{"data.password"}},
		{Resource: "example.com/widgets", PathRegex: `\.token$`},
		{PathRegex: `^metadata\.annotations\["secret/`},
	}})
	require.NoError(t, err)
	cm := diff.Resource{Resource: "configmaps"}
	got, err := d.Compare(cm, []byte(`{"data":{"password":"a","user":"u1"}}`), []byte(`{"data":{"password":"b","user":"u2"}}`))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, got[0].Redacted)
	assert.NotContains(t, got[0].String(), `"a"`)
	assert.Equal(t, "data.user u1 -> u2", got[1].String())

	// The same path on another resource is not redacted.
	got, err = d.Compare(diff.Resource{Resource: "pods"}, []byte(`{"data":{"password":"a"}}`), []byte(`{"data":{"password":"b"}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"data.password a -> b"}, lines(got))

	// Regex, also inside an added subtree.
	w := diff.Resource{Group: "example.com", Resource: "widgets"}
	got, err = d.Compare(w, []byte(`{"spec":{}}`), []byte(`{"spec":{"auth":{"token":"s3cret","user":"u"}}}`))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.NotContains(t, got[0].String(), "s3cret")
	assert.Contains(t, got[0].String(), `"user":"u"`)

	got, err = d.Compare(cm, []byte(`{"metadata":{"annotations":{"secret/key":"v1","other":"o"}}}`),
		[]byte(`{"metadata":{"annotations":{"secret/key":"v2","other":"o2"}}}`))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, got[0].Redacted)
	assert.False(t, got[1].Redacted)

	snap, err := d.Snapshot(w, []byte(`{"spec":{"list":[{"name":"a","token":"s3cret"}]}}`))
	require.NoError(t, err)
	assert.NotContains(t, string(snap), "s3cret")
	assert.True(t, json.Valid(snap))
}

func TestSnapshot(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	body := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"x","managedFields":[{"manager":"a","fieldsV1":{"f:spec":{}}}],"resourceVersion":"5"},"spec":{"replicas":2}}`
	snap, err := d.Snapshot(diff.Resource{Group: "apps", Resource: "deployments"}, []byte(body))
	require.NoError(t, err)
	assert.JSONEq(t, `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"x","resourceVersion":"5"},"spec":{"replicas":2}}`, string(snap))
	snap, err = d.Snapshot(diff.Resource{}, []byte(`{"metadata":{"managedFields":[]}}`))
	require.NoError(t, err)
	assert.Equal(t, `{"metadata":{}}`, string(snap))
}

func TestFormatValue(t *testing.T) {
	for in, want := range map[string]string{
		``: none, `"abc"`: "abc", `"a b"`: `"a b"`, `"1"`: `"1"`, `"true"`: `"true"`, `""`: `""`, `"<none>"`: `"<none>"`,
		`12`: "12", `{"a": 1}`: `{"a": 1}`, "{\n\"a\": 1}": `{"a":1}`, `"alpine:3.16"`: "alpine:3.16",
	} {
		assert.Equal(t, want, formatValue(json.RawMessage(in), 0), in)
	}
	assert.Equal(t, "abc…", formatValue(json.RawMessage(`"abcdef"`), 3))
}

func TestStripManagedFields(t *testing.T) {
	for in, want := range map[string]string{
		`{"metadata":{"managedFields":[{"a":1}]}}`:                     `{"metadata":{}}`,
		`{"metadata":{"name":"x","managedFields":[{"a":1}]},"spec":1}`: `{"metadata":{"name":"x"},"spec":1}`,
		`{"metadata":{"managedFields":[],"name":"x"}}`:                 `{"metadata":{"name":"x"}}`,
		`{"metadata":{"a":1, "managedFields" : [] , "b":2}}`:           `{"metadata":{"a":1,"b":2}}`,
		`{"metadata":{"name":"x"}}`:                                    `{"metadata":{"name":"x"}}`,
	} {
		got, ok := stripManagedFields([]byte(in))
		require.True(t, ok, in)
		assert.Equal(t, want, string(got), in)
		assert.True(t, json.Valid(got), in)
	}
	_, ok := stripManagedFields([]byte(`[1]`))
	assert.False(t, ok)
}

func TestSetPath(t *testing.T) {
	for _, tt := range []struct{ in, val, want string }{
		{`{"spec":{"replicas":2,"x":1}}`, `4`, `{"spec":{"replicas":4,"x":1}}`},
		{`{"spec":{"x":1}}`, `4`, `{"spec":{"x":1,"replicas":4}}`},
		{`{"metadata":{}}`, `4`, `{"metadata":{},"spec":{"replicas":4}}`},
		{`{}`, `4`, `{"spec":{"replicas":4}}`},
		{`{"spec":5}`, `4`, `{"spec":{"replicas":4}}`},
		{` {"spec": {"replicas": null}, "spec": {"replicas": 7}} `, `4`, `{"spec": {"replicas": 4}, "spec": {"replicas": 7}}`},
	} {
		got, err := setPath([]byte(tt.in), []byte(tt.val), "spec", "replicas")
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(got))
		// replacePath reads, in the same pass, what getPath reads before the write.
		wantOld, wantHad := getPath([]byte(tt.in), "spec", "replicas")
		got, old, had, _, err := replacePath([]byte(tt.in), nil, []byte(tt.val), "spec", "replicas")
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(got))
		assert.Equal(t, wantHad, had, tt.in)
		assert.Equal(t, string(wantOld), string(old), tt.in)
	}
	_, _, _, _, err := replacePath([]byte(`{"spec":{"replicas":`), nil, []byte(`4`), "spec", "replicas")
	assert.Error(t, err)
}
