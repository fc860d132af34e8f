package linker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// quiet keeps the linkers' warnings out of the test output (an unset logger is slog.Default()).
var quiet = telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}

// bodyWithOwners renders an object body with the given ownerReferences.
func bodyWithOwners(kind, ns, name string, owners ...map[string]any) json.RawMessage {
	meta := map[string]any{"name": name, "uid": "uid-" + name}
	if ns != "" {
		meta["namespace"] = ns
	}
	if len(owners) > 0 {
		list := make([]any, len(owners))
		for i, o := range owners {
			list[i] = o
		}
		meta["ownerReferences"] = list
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": map[string]any{}})
	if err != nil {
		panic(err)
	}
	return b
}

func owner(apiVersion, kind, name string, controller bool) map[string]any {
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "name": name, "uid": "uid-" + name, "controller": controller}
}

func TestOwnerLinker(t *testing.T) {
	pod := aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "demo-7fb4c846ff-hhdmn")}
	pod.UID = "7edd5ec7-cef8-4024-b923-edc081cc85ec"
	rbRef := aggregator.ObjectRef{Cluster: "c1", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings", Namespace: "team", Name: "rb"}
	nodeRef := aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "nodes", Name: "n1"}

	tests := []struct {
		name   string
		obj    aggregator.Object
		getter *kubetest.Getter
		want   []aggregator.Link
	}{{
		name: "controlling owner from a real pod body",
		obj:  aggregator.Object{ObjectRef: pod.ObjectRef, Body: readTestdata(t, "pod.json")},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "default", Name: "demo-7fb4c846ff", UID: "d3b29426-1a55-49ad-8345-8cce95ec6261"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "only non-controlling owners: no link",
		obj: aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p"), Body: bodyWithOwners("Pod", "default", "p",
			owner("apps/v1", "ReplicaSet", "rs", false), owner("v1", "ConfigMap", "cm", false))},
	}, {
		name: "the controlling one among several owners",
		obj: aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p"), Body: bodyWithOwners("Pod", "default", "p",
			owner("v1", "ConfigMap", "cm", false), owner("batch/v1", "Job", "job", true))},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "batch", Version: "v1", Resource: "jobs", Namespace: "default", Name: "job", UID: "uid-job"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "cluster-scoped owner of a namespaced pod (mirror pod): no namespace",
		obj: aggregator.Object{ObjectRef: kubetest.PodRef("c1", "kube-system", "etcd-n1"), Body: bodyWithOwners("Pod", "kube-system", "etcd-n1",
			owner("v1", "Node", "n1", true))},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "nodes", Name: "n1", UID: "uid-n1"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "ClusterRole owning a namespaced RoleBinding: no namespace",
		obj: aggregator.Object{ObjectRef: rbRef, Body: bodyWithOwners("RoleBinding", "team", "rb",
			owner("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", true))},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles", Name: "admin", UID: "uid-admin"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "unknown kind: plural guess, child's namespace",
		obj: aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p"), Body: bodyWithOwners("Pod", "default", "p",
			owner("example.com/v1alpha1", "TrafficPolicy", "tp", true))},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "example.com", Version: "v1alpha1", Resource: "trafficpolicies", Namespace: "default", Name: "tp", UID: "uid-tp"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "unknown kind owning a cluster-scoped object: no namespace",
		obj: aggregator.Object{ObjectRef: nodeRef, Body: bodyWithOwners("Node", "", "n1",
			owner("example.com/v1", "Box", "b", true))},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "example.com", Version: "v1", Resource: "boxes", Name: "b", UID: "uid-b"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "no body: the getter is used",
		obj:  aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p")},
		getter: &kubetest.Getter{Objects: map[aggregator.ObjectKey]json.RawMessage{
			kubetest.PodRef("c1", "default", "p").Key(): bodyWithOwners("Pod", "default", "p", owner("apps/v1", "ReplicaSet", "rs", true)),
		}},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "default", Name: "rs", UID: "uid-rs"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name: "a subresource's Status body is not the object's: the getter is used",
		obj:  aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p"), Body: json.RawMessage(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}`)},
		getter: &kubetest.Getter{Objects: map[aggregator.ObjectKey]json.RawMessage{
			kubetest.PodRef("c1", "default", "p").Key(): bodyWithOwners("Pod", "default", "p", owner("apps/v1", "ReplicaSet", "rs", true)),
		}},
		want: []aggregator.Link{{
			Target: aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "default", Name: "rs", UID: "uid-rs"},
			Role:   aggregator.RoleParent, Class: classChildren,
		}},
	}, {
		name:   "getter says not found: no link, no error",
		obj:    aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "gone")},
		getter: &kubetest.Getter{},
	}, {
		name:   "a null body is no body",
		obj:    aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "gone"), Body: json.RawMessage("null")},
		getter: &kubetest.Getter{},
	}, {
		name: "no body and no getter: no link",
		obj:  aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "p")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var getter kube.ObjectGetter
			if tt.getter != nil {
				getter = tt.getter
			}
			l := NewOwnerLinker(nil, getter, quiet)
			assert.Equal(t, "owner", l.Name())
			links, err := l.Lookup(context.Background(), tt.obj)
			require.NoError(t, err)
			assert.Equal(t, tt.want, links)
		})
	}
}

func TestOwnerLinkerErrors(t *testing.T) {
	ref := kubetest.PodRef("c1", "default", "p")
	boom := errors.New("apiserver down")
	l := NewOwnerLinker(nil, &kubetest.Getter{Err: boom}, quiet)
	_, err := l.Lookup(context.Background(), aggregator.Object{ObjectRef: ref})
	require.ErrorIs(t, err, boom)

	l = NewOwnerLinker(nil, nil, quiet)
	_, err = l.Lookup(context.Background(), aggregator.Object{ObjectRef: ref, Body: json.RawMessage(`[1,2]`)})
	require.Error(t, err, "a body that is not an object")

	_, err = l.Lookup(context.Background(), aggregator.Object{ObjectRef: ref, Body: bodyWithOwners("Pod", "default", "p", owner("a/b/c", "X", "x", true))})
	require.Error(t, err, "a malformed owner apiVersion")
}

func TestOwnerLinkerWithObjectCache(t *testing.T) {
	dyn := kubetest.NewDynamic()
	var pod map[string]any
	require.NoError(t, json.Unmarshal(readTestdata(t, "pod.json"), &pod))
	dyn.Add(kubetest.PodsGVR, pod)
	m := kubetest.NewMetrics()
	cache, err := kube.NewObjectCache(kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{}, telemetry.Settings{MeterProvider: m.Provider})
	require.NoError(t, err)
	l := NewOwnerLinker(nil, cache, telemetry.Settings{Logger: quiet.Logger, MeterProvider: m.Provider})

	obj := aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "demo-7fb4c846ff-hhdmn")}
	for range 3 {
		links, err := l.Lookup(context.Background(), obj)
		require.NoError(t, err)
		require.Len(t, links, 1)
		assert.Equal(t, "demo-7fb4c846ff", links[0].Target.Name)
	}
	assert.EqualValues(t, 1, dyn.Gets())
	assert.EqualValues(t, 3, m.Count(t, "kelemetry.linker.owner.lookups", "source", "getter"))

	links, err := l.Lookup(context.Background(), aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "gone")})
	require.NoError(t, err)
	assert.Empty(t, links)
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.linker.owner.lookups", "source", "not_found"))
}

func annotated(cluster, ns, name string, annotations map[string]string) aggregator.Object {
	meta := map[string]any{"name": name, "namespace": ns, "annotations": annotations}
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
	if err != nil {
		panic(err)
	}
	return aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: cluster, Version: "v1", Resource: "configmaps", Namespace: ns, Name: name},
		Body:      body,
	}
}

func TestAnnotationLinker(t *testing.T) {
	deploy := func(cluster string) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: cluster, Group: "apps", Version: "v1", Resource: "deployments", Namespace: "default", Name: "web"}
	}
	const webLink = `{"group":"apps","version":"v1","resource":"deployments","namespace":"default","name":"web"}`
	tests := []struct {
		name string
		obj  aggregator.Object
		want []aggregator.Link
	}{{
		name: "kelemetry.io key, cluster defaults to the object's",
		obj:  annotated("c1", "default", "cm", map[string]string{annotationParentLink: webLink}),
		want: []aggregator.Link{{Target: deploy("c1"), Role: aggregator.RoleParent}},
	}, {
		name: "predecessor's key",
		obj:  annotated("c1", "default", "cm", map[string]string{legacyAnnotationParentLink: webLink}),
		want: []aggregator.Link{{Target: deploy("c1"), Role: aggregator.RoleParent}},
	}, {
		name: "both keys: kelemetry.io wins",
		obj: annotated("c1", "default", "cm", map[string]string{
			annotationParentLink:       webLink,
			legacyAnnotationParentLink: `{"group":"apps","version":"v1","resource":"statefulsets","namespace":"default","name":"db"}`,
		}),
		want: []aggregator.Link{{Target: deploy("c1"), Role: aggregator.RoleParent}},
	}, {
		name: "another cluster, with uid",
		obj: annotated("c1", "default", "cm", map[string]string{
			annotationParentLink: `{"cluster":"c2","group":"apps","version":"v1","resource":"deployments","namespace":"default","name":"web","uid":"u1"}`,
		}),
		want: []aggregator.Link{{Target: func() aggregator.ObjectRef { r := deploy("c2"); r.UID = "u1"; return r }(), Role: aggregator.RoleParent}},
	}, {
		name: "cluster-scoped parent",
		obj: annotated("c1", "default", "cm", map[string]string{
			annotationParentLink: `{"version":"v1","resource":"nodes","name":"n1"}`,
		}),
		want: []aggregator.Link{{Target: aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "nodes", Name: "n1"}, Role: aggregator.RoleParent}},
	}, {
		name: "no annotation",
		obj:  annotated("c1", "default", "cm", map[string]string{"other": "x"}),
	}, {
		name: "a real pod from the annotations scenario",
		obj:  aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "web-debug"), Body: readTestdata(t, "pod-parent-link.json")},
		want: []aggregator.Link{{Target: deploy("c1"), Role: aggregator.RoleParent}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewAnnotationLinker(nil, quiet)
			assert.Equal(t, "annotation", l.Name())
			links, err := l.Lookup(context.Background(), tt.obj)
			require.NoError(t, err)
			assert.Equal(t, tt.want, links)
		})
	}
}

func TestAnnotationLinkerInvalid(t *testing.T) {
	tests := []struct {
		name, value, reason string
	}{
		{"bad JSON", `{"name":`, "json"},
		{"not an object", `"web"`, "json"},
		{"missing name", `{"group":"apps","version":"v1","resource":"deployments","namespace":"default"}`, "missing_field"},
		{"missing resource", `{"group":"apps","version":"v1","namespace":"default","name":"web"}`, "missing_field"},
		{"points at itself", `{"version":"v1","resource":"configmaps","namespace":"default","name":"cm"}`, "self"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := kubetest.NewMetrics()
			logs := &logtest.Recorder{}
			l := NewAnnotationLinker(nil, telemetry.Settings{Logger: slog.New(logs), MeterProvider: m.Provider})
			links, err := l.Lookup(context.Background(), annotated("c1", "default", "cm", map[string]string{annotationParentLink: tt.value}))
			require.NoError(t, err, "an invalid annotation is not the object's fault")
			assert.Empty(t, links)
			assert.EqualValues(t, 1, m.Count(t, "kelemetry.linker.annotation.invalid", "reason", tt.reason))
			assert.Equal(t, 1, logs.Count(slog.LevelWarn))
		})
	}
}

func TestAnnotationLinkerWarnRateLimit(t *testing.T) {
	m := kubetest.NewMetrics()
	logs := &logtest.Recorder{}
	l := NewAnnotationLinker(nil, telemetry.Settings{Logger: slog.New(logs), MeterProvider: m.Provider})
	clock := kubetest.NewClock()
	l.now = clock.Now
	bad := annotated("c1", "default", "cm", map[string]string{annotationParentLink: "nope"})
	other := annotated("c1", "default", "cm2", map[string]string{annotationParentLink: "nope"})

	for range 5 {
		_, err := l.Lookup(context.Background(), bad)
		require.NoError(t, err)
	}
	_, err := l.Lookup(context.Background(), other)
	require.NoError(t, err)
	assert.Equal(t, 2, logs.Count(slog.LevelWarn), "one warning per object per minute")
	assert.EqualValues(t, 6, m.Count(t, "kelemetry.linker.annotation.invalid", "", ""), "every occurrence is counted")

	clock.Advance(time.Minute)
	_, err = l.Lookup(context.Background(), bad)
	require.NoError(t, err)
	assert.Equal(t, 3, logs.Count(slog.LevelWarn))
}

func TestAnnotationLinkerGetter(t *testing.T) {
	obj := annotated("c1", "default", "cm", map[string]string{annotationParentLink: `{"group":"apps","version":"v1","resource":"deployments","namespace":"default","name":"web"}`})
	getter := &kubetest.Getter{Objects: map[aggregator.ObjectKey]json.RawMessage{obj.Key(): obj.Body}}
	l := NewAnnotationLinker(getter, quiet)

	links, err := l.Lookup(context.Background(), aggregator.Object{ObjectRef: obj.ObjectRef})
	require.NoError(t, err)
	require.Len(t, links, 1)
	assert.Equal(t, "web", links[0].Target.Name)
	assert.EqualValues(t, 1, getter.Calls())

	links, err = l.Lookup(context.Background(), aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "gone")})
	require.NoError(t, err)
	assert.Empty(t, links)
}

func TestDecodeMetadata(t *testing.T) {
	m, err := decodeMetadata([]byte(`{"apiVersion":"v1","metadata":{"name":"x","uid":"u","annotations":{"kelemetry.io/parent-link":"v","KELEMETRY.IO/PARENT-LINK":"w"}},"kind":"Pod","spec":{"broken"`), wantAnnotations)
	require.NoError(t, err, "reading stops once kind and metadata are known")
	assert.Equal(t, "Pod", m.kind)
	assert.Equal(t, "x", m.name)
	assert.Equal(t, "u", m.uid)
	require.NotNil(t, m.parentLink)
	assert.Equal(t, "v", *m.parentLink, "annotation keys match exactly")
	assert.Nil(t, m.legacyLink)

	_, err = decodeMetadata([]byte(`{"kind":"Pod"`), wantAnnotations)
	require.Error(t, err)
	_, err = decodeMetadata([]byte(`null`), wantAnnotations)
	require.Error(t, err)
}

// TestDecodeMetadataAgreesWithEncodingJSON compares the reader with encoding/json on bodies that
// are valid and bodies that are not: where encoding/json decodes the metadata, the reader gives
// the same fields; where it refuses the JSON, so does the reader.
func TestDecodeMetadataAgreesWithEncodingJSON(t *testing.T) {
	pod := string(readTestdata(t, "pod.json"))
	type ref struct {
		APIVersion, Kind, Name, UID string
		Controller                  bool
	}
	type meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string            `json:"name"`
			UID             string            `json:"uid"`
			OwnerReferences []ref             `json:"ownerReferences"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	bodies := []string{
		pod,
		`{"kind":"Pod","metadata":{"name":"a","uid":"u1","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u2","controller":true,"blockOwnerDeletion":true}]}}`,
		`{"metadata":{"name":"a\u00e9\n","ownerReferences":null,"annotations":null},"kind":"P\u006fd"}`,
		`{"kind":"Pod","metadata":{"name":"a","ownerReferences":[{"name":"x","controller":null},{"name":"y","controller":false}],"labels":{"a":"b"},"n":[1,-2.5e3,true,false,null,{"x":[]}]}}`,
		`{"kind":"Pod","metadata":{"annotations":{"kelemetry.kubewharf.io/parent-link":"{\"name\":\"x\"}","k":"\u00e9\ud83d\ude00"}}}`,
		` { "kind" : "Pod" , "metadata" : { "name" : "sp" } } `,
		`{"kind":"Pod","metadata":{"name":5}}`,
		`{"kind":"Pod","metadata":{"ownerReferences":{}}}`,
		`{"kind":"Pod","metadata":{"ownerReferences":[{"controller":"yes"}]}}`,
		`{"kind":"Pod","metadata":{"annotations":{"kelemetry.io/parent-link":5}}}`,
		`{"kind":"Pod","metadata":{"x":"a` + "\x01" + `b"}}`,
		`{"kind":"Pod","metadata":{"x":"\q"}}`,
		`{"kind":"Pod","metadata":{"x":"\u12"}}`,
		`{"kind":"Pod","metadata":{"x":01}}`,
		`{"kind":"Pod","metadata":{"x":-}}`,
		`{"kind":"Pod","metadata":{"x":tru}}`,
		`{"kind":"Pod","metadata":{"x":[1,]}}`,
		`{"kind":"Pod","metadata":{"x":{"a":1,}}}`,
		`{"kind":"Pod","metadata":{"x" 1}}`,
		`{"kind":"Pod" "metadata":{}}`,
	}
	for _, body := range bodies {
		var want meta
		wantErr := json.Unmarshal([]byte(body), &want)
		got, err := decodeMetadata([]byte(body), wantOwners|wantAnnotations)
		if wantErr != nil {
			assert.Error(t, err, "%s (encoding/json: %v)", body, wantErr)
			continue
		}
		require.NoError(t, err, body)
		assert.Equal(t, want.Kind, got.kind, body)
		assert.Equal(t, want.Metadata.Name, got.name, body)
		assert.Equal(t, want.Metadata.UID, got.uid, body)
		require.Len(t, got.owners, len(want.Metadata.OwnerReferences), body)
		for i, r := range want.Metadata.OwnerReferences {
			assert.Equal(t, r, ref(got.owners[i]), body)
		}
		for key, dst := range map[string]*string{annotationParentLink: got.parentLink, legacyAnnotationParentLink: got.legacyLink} {
			v, ok := want.Metadata.Annotations[key]
			if assert.Equal(t, ok, dst != nil, body) && ok {
				assert.Equal(t, v, *dst, body)
			}
		}
	}
	// Stricter than encoding/json: invalid UTF-8 is refused, not replaced.
	_, err := decodeMetadata([]byte(`{"kind":"Pod","metadata":{"x":"`+"\xff"+`"}}`), wantOwners)
	assert.ErrorContains(t, err, "invalid UTF-8")
	// What follows kind and metadata is not read.
	for _, body := range []string{`{"kind":"Pod","metadata":{"name":"a"}`, `{"kind":"Pod","metadata":{"name":"a"}} trailing`} {
		got, err := decodeMetadata([]byte(body), wantOwners)
		require.NoError(t, err, body)
		assert.Equal(t, "a", got.name)
	}
	deep := `{"kind":"Pod","metadata":{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}`
	_, err = decodeMetadata([]byte(deep), wantOwners)
	assert.ErrorContains(t, err, "nested more than")
}

// BenchmarkOwnerLinker measures the owner linker on a real Pod body (from an audit
// responseObject, managedFields and status included).
func BenchmarkOwnerLinker(b *testing.B) {
	body := readTestdata(b, "pod.json")
	l := NewOwnerLinker(nil, nil, quiet)
	obj := aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "demo-7fb4c846ff-hhdmn"), Body: body}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		links, err := l.Lookup(context.Background(), obj)
		if err != nil || len(links) != 1 {
			b.Fatal(links, err)
		}
	}
}

// BenchmarkAnnotationLinker measures the annotation linker on a real annotated Pod body.
func BenchmarkAnnotationLinker(b *testing.B) {
	body := readTestdata(b, "pod-parent-link.json")
	l := NewAnnotationLinker(nil, quiet)
	obj := aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "web-debug"), Body: body}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		links, err := l.Lookup(context.Background(), obj)
		if err != nil || len(links) != 1 {
			b.Fatal(links, err)
		}
	}
}

func readTestdata(t testing.TB, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}
