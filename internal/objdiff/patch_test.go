package objdiff

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestPatchChanges(t *testing.T) {
	d, err := New(diff.Options{})
	require.NoError(t, err)
	deploys := diff.Resource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name, body string
		res        diff.Resource
		want       []string
		kind       string
		notPatch   bool
	}{{
		name: "merge patch: fields down to the leaves, null removes, lists whole, resourceVersion precondition left out",
		body: `{"metadata":{"resourceVersion":"41","finalizers":null,"labels":{"app":"web","tier":null}},` +
			`"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"app","image":"nginx:2"}]}}}}`,
		res: deploys,
		want: []string{
			"metadata.finalizers <unknown> -> <none>",
			"metadata.labels.app <unknown> -> web",
			"metadata.labels.tier <unknown> -> <none>",
			"spec.replicas <unknown> -> 3",
			`spec.template.spec.containers <unknown> -> [{"name":"app","image":"nginx:2"}]`,
		},
		kind: patchMerge,
	}, {
		name: "strategic merge patch: $setElementOrder skipped, other directives kept",
		body: `{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"app"}],` +
			`"containers":[{"name":"app","image":"nginx:3"}]}}},"metadata":{"labels":{"$patch":"replace","a":"b"}}}`,
		res: deploys,
		want: []string{
			`spec.template.spec.containers <unknown> -> [{"name":"app","image":"nginx:3"}]`,
			`metadata.labels["$patch"] <unknown> -> replace`,
			"metadata.labels.a <unknown> -> b",
		},
		kind: patchStrategic,
	}, {
		name: "an empty object is a value",
		body: `{"spec":{"selector":{}}}`,
		want: []string{"spec.selector <unknown> -> {}"},
		kind: patchMerge,
	}, {
		name: "a Secret's data is redacted",
		body: `{"data":{"password":"aHVudGVyMg=="},"metadata":{"labels":{"a":"b"}}}`,
		res:  diff.Resource{Resource: "secrets"},
		want: []string{"data.password <unknown> -> <redacted:", "metadata.labels.a <unknown> -> b"},
		kind: patchMerge,
	}, {
		name:     "a JSON patch is not read",
		body:     `[{"op":"replace","path":"/spec/replicas","value":3}]`,
		notPatch: true,
	}, {
		name:     "an apply configuration is not a change",
		body:     `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`,
		notPatch: true,
	}, {
		name:     "not JSON",
		body:     `{"spec":`,
		notPatch: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			changes, kind, ok := d.patchChanges(tc.res, []byte(tc.body))
			if tc.notPatch {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.kind, kind)
			var lines []string
			for _, c := range changes {
				assert.Equal(t, OpPatch, c.Op)
				lines = append(lines, c.String())
			}
			require.Len(t, lines, len(tc.want), "%q", lines)
			for i, want := range tc.want {
				if strings.HasSuffix(want, "<redacted:") {
					assert.True(t, strings.HasPrefix(lines[i], want), lines[i])
					assert.True(t, changes[i].Redacted)
					assert.NotContains(t, lines[i], "aHVudGVyMg")
					continue
				}
				assert.Equal(t, want, lines[i])
			}
		})
	}
}

// A patch of an object whose previous version is unknown shows its request body as the change;
// a write answered with the object's metadata only is diffed against the last version seen.
func TestStreamRequestPatchAndMetadataOnly(t *testing.T) {
	ctx := context.Background()
	s, err := NewStream(diff.StreamConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	cm := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "held"}
	body := func(rv, finalizers, extra string) []byte {
		return []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"held","namespace":"default","resourceVersion":"` + rv +
			`"` + finalizers + extra + `,"managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`)
	}
	partial := func(rv, finalizers, extra string) []byte {
		return []byte(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"held","namespace":"default","resourceVersion":"` + rv +
			`"` + finalizers + extra + `,"managedFields":[{"manager":"m"}]}}`)
	}
	ops := func(r Result) []string {
		var out []string
		for _, l := range r.Logs {
			op, _ := l.Attributes.Get(diff.AttrOp)
			out = append(out, op)
		}
		return out
	}

	// The first write seen of an object that existed before: a merge patch.
	r := s.Observe(ctx, Write{Object: cm, Verb: "patch", Request: []byte(`{"metadata":{"labels":{"team":"a"}}}`),
		Response: body("10", "", `,"labels":{"team":"a"}`), IsObject: true, ResourceVersion: "10", Time: at})
	assert.Equal(t, []string{
		"diff: diff unavailable: no previous version seen; the changes are the request's merge patch (values before it unknown)",
		"diff: metadata.labels.team <unknown> -> a",
	}, msgs(r))
	assert.Equal(t, []string{OpRequestPatch, string(OpPatch)}, ops(r))
	// The response was kept: the next write diffs against it.
	r = s.Observe(ctx, Write{Object: cm, Verb: "update", Response: body("11", `,"finalizers":["example.com/hold"]`, `,"labels":{"team":"a"}`),
		IsObject: true, ResourceVersion: "11", Time: at})
	assert.Equal(t, []string{`diff: metadata.finalizers <none> -> ["example.com/hold"]`}, msgs(r))

	// A delete marks it; the garbage collector's metadata-only patch removes the last finalizer.
	// kube-apiserver answers with the version as it was removed: the resourceVersion of the
	// delete's, so only Final tells the write from a no-op.
	del := `,"deletionTimestamp":"2026-11-29T17:00:01Z","deletionGracePeriodSeconds":0`
	r = s.Observe(ctx, Write{Object: cm, Verb: "delete", Response: body("12", `,"finalizers":["example.com/hold"]`, del),
		IsObject: true, ResourceVersion: "12", Time: at})
	require.Len(t, r.Logs, 1)
	gc := Write{Object: cm, Verb: "patch", Request: []byte(`{"metadata":{"resourceVersion":"12","finalizers":null}}`),
		Response: partial("12", "", del), MetadataOnly: true, ResourceVersion: "12", Time: at}
	notFinal := gc
	notFinal.Object.Name = "unrelated"
	s.Observe(ctx, Write{Object: notFinal.Object, Verb: "create", Response: body("12", "", ""), IsObject: true, ResourceVersion: "12", Time: at})
	assert.Equal(t, []string{"diff: no-op: resourceVersion 12 unchanged"}, msgs(s.Observe(ctx, notFinal)))
	gc.Final = true
	r = s.Observe(ctx, gc)
	assert.Equal(t, []string{`diff: metadata.finalizers ["example.com/hold"] -> <none>`}, msgs(r),
		"the spec and data are the last version's: only the metadata changed")
	assert.Equal(t, aggregator.Attrs{{Key: diff.AttrBaseRV, Value: "12"}}, r.Attributes)
	assert.True(t, s.Knows(cm.Key()))

	// A metadata-only write of an object never seen: the request's patch, nothing kept.
	other := cm
	other.Name = "other"
	r = s.Observe(ctx, Write{Object: other, Verb: "patch", Request: []byte(`{"metadata":{"ownerReferences":null}}`),
		Response: partial("20", "", ""), MetadataOnly: true, ResourceVersion: "20", Time: at})
	assert.Equal(t, []string{
		"diff: diff unavailable: no previous version seen (the response held the object's metadata only); the changes are the request's merge patch (values before it unknown)",
		"diff: metadata.ownerReferences <unknown> -> <none>",
	}, msgs(r))
	r = s.Observe(ctx, Write{Object: other, Verb: "patch", Request: []byte(`{"metadata":{"labels":{"x":"y"}}}`),
		Response: partial("21", "", `,"labels":{"x":"y"}`), MetadataOnly: true, ResourceVersion: "21", Time: at})
	assert.Equal(t, OpRequestPatch, ops(r)[0], "a metadata-only response is not kept as the object")

	// An update (the request is the whole object) and a JSON patch keep saying why.
	third := cm
	third.Name = "third"
	r = s.Observe(ctx, Write{Object: third, Verb: "patch", Request: []byte(`[{"op":"add","path":"/metadata/labels","value":{}}]`),
		Response: body("30", "", ""), IsObject: true, ResourceVersion: "30", Time: at})
	assert.Equal(t, []string{"diff: diff unavailable: no previous version seen"}, msgs(r))
}
