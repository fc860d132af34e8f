package linkrule

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/kube"
)

func mustCompile(t testing.TB, lr LinkRule) *Rule {
	t.Helper()
	r, err := Compile(lr, "test", CompileOptions{})
	require.NoError(t, err)
	return r
}

// fakeGetter serves bodies by object key.
type fakeGetter struct {
	bodies map[aggregator.ObjectKey]string
	gets   int
}

func (g *fakeGetter) Get(_ context.Context, ref aggregator.ObjectRef) (json.RawMessage, error) {
	g.gets++
	b, ok := g.bodies[ref.Key()]
	if !ok {
		return nil, kube.ErrObjectNotFound
	}
	return json.RawMessage(b), nil
}

func TestLinkerIndexAndLookup(t *testing.T) {
	l := newLinker(nil, nil, silent)
	pod := obj("", "pods", "ns1", "p", `{"kind":"Pod","metadata":{"name":"p","labels":{"app":"web"}},"spec":{"secretName":"s1"}}`)

	links, err := l.Lookup(t.Context(), pod)
	require.NoError(t, err)
	assert.Empty(t, links, "no rules")

	l.Put(setDir, mustCompile(t, rule("secrets", nil)))
	l.Put(setCluster, mustCompile(t, rule("any-web", func(s *Spec) {
		s.Source.Resources = []GroupResource{{Group: "*", Resource: "*"}, {Group: "", Resource: "pods"}} // listed twice: applied once
		s.Source.LabelSelector = nil
		s.Source.Condition = "object.metadata.?labels.app.orValue('') == 'web'"
		s.Role, s.Class = "child", "web"
		s.Targets[0] = Target{Resource: "services", Name: "'web'"}
	})))
	l.Put(setCluster, mustCompile(t, rule("broken", func(s *Spec) { s.Targets[0].Name = "object.spec.secretName.substring(100)" })))
	l.Put(setCluster, mustCompile(t, rule("apps-only", func(s *Spec) { s.Source.Resources = []GroupResource{{Group: "apps", Resource: "*"}} })))
	require.Len(t, l.rules(), 4)

	links, err = l.Lookup(t.Context(), pod)
	require.NoError(t, err, "a failing rule does not fail the lookup")
	assert.ElementsMatch(t, []string{"parent volumes c1//secrets/ns1/s1", "child web c1//services/ns1/web"}, linkStrings(links))
	assert.EqualValues(t, 1, l.rule(setCluster, "broken").Stats().Errors.Load())
	assert.Contains(t, l.rule(setCluster, "broken").Stats().LastError(), "rule broken: targets[0]: name:")
	assert.EqualValues(t, 1, l.rule(setCluster, "any-web").Stats().Evaluations.Load())
	assert.Zero(t, l.rule(setCluster, "apps-only").Stats().Evaluations.Load())

	// Deleting and replacing rules takes effect on the next lookup.
	l.Delete(setCluster, "any-web")
	l.Replace(setDir, nil)
	links, err = l.Lookup(t.Context(), pod)
	require.NoError(t, err)
	assert.Empty(t, links)
	assert.Len(t, l.rules(), 2)
}

func TestLinkerFetchesMissingBody(t *testing.T) {
	getter := &fakeGetter{bodies: map[aggregator.ObjectKey]string{
		{Cluster: "c1", Resource: "pods", Namespace: "ns1", Name: "p"}: `{"kind":"Pod","metadata":{"name":"p"},"spec":{"secretName":"fetched"}}`,
	}}
	l := newLinker(getter, nil, silent)
	l.Put(setDir, mustCompile(t, rule("secrets", nil)))

	// No body: fetched.
	links, err := l.Lookup(t.Context(), obj("", "pods", "ns1", "p", ""))
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/fetched"}, linkStrings(links))
	// A subresource's body (Scale, Status) is not the object's: fetched too.
	links, err = l.Lookup(t.Context(), obj("", "pods", "ns1", "p", `{"kind":"Status","metadata":{},"spec":{"secretName":"wrong"}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/fetched"}, linkStrings(links))
	// The object is gone: no links, no error.
	links, err = l.Lookup(t.Context(), obj("", "pods", "ns1", "gone", ""))
	require.NoError(t, err)
	assert.Empty(t, links)
	assert.Equal(t, 3, getter.gets)
	// Objects no rule selects are never fetched.
	_, err = l.Lookup(t.Context(), obj("apps", "deployments", "ns1", "p", ""))
	require.NoError(t, err)
	assert.Equal(t, 3, getter.gets)
}

func podObject(ns, name string, labels map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
	}}
}

func TestClusterListerAcrossClusters(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	listKinds := map[schema.GroupVersionResource]string{pods: "PodList"}
	c2 := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		podObject("ns1", "web-0", map[string]any{"app": "web"}),
		podObject("ns1", "web-1", map[string]any{"app": "web"}),
		podObject("ns1", "web-2", map[string]any{"app": "web"}),
		podObject("ns1", "db-0", map[string]any{"app": "db"}),
	)
	c1 := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	l := newLinker(nil, clusterLister{Clusters: kubetest.Clusters{"c1": c1, "c2": c2}}, silent)
	svc := obj("", "services", "ns1", "web", `{"kind":"Service","metadata":{"name":"web"},"spec":{"selector":{"app":"web"}}}`)
	newRule := func(cluster string, max int) *Rule {
		r, err := Compile(rule("svc-"+cluster, func(s *Spec) {
			s.Source.Resources = []GroupResource{{Resource: "services"}}
			s.Role, s.Class = "child", "pods"
			s.Targets[0] = Target{Cluster: cluster, Version: "v1", Resource: "pods", Selector: "object.spec.selector"}
		}), "test", CompileOptions{MaxTargetsPerObject: max})
		require.NoError(t, err)
		return r
	}

	l.Replace(setDir, []*Rule{newRule("c2", 0)})
	links, err := l.Lookup(t.Context(), svc)
	require.NoError(t, err)
	assert.Equal(t, []string{"child pods c2//pods/ns1/web-0", "child pods c2//pods/ns1/web-1", "child pods c2//pods/ns1/web-2"}, linkStrings(links))

	// Bounded: the list is cut and the truncation counted.
	r := newRule("c2", 2)
	l.Replace(setDir, []*Rule{r})
	links, err = l.Lookup(t.Context(), svc)
	require.NoError(t, err)
	assert.Len(t, links, 2)
	assert.EqualValues(t, 1, r.Stats().Truncated.Load())

	// The source's own cluster has no such pods; an unknown cluster is an error of the rule.
	l.Replace(setDir, []*Rule{newRule("", 0), newRule("nowhere", 0)})
	links, err = l.Lookup(t.Context(), svc)
	require.NoError(t, err)
	assert.Empty(t, links)
	bad := l.rule(setDir, "svc-nowhere")
	assert.EqualValues(t, 1, bad.Stats().Errors.Load())
	assert.Contains(t, bad.Stats().LastError(), "unknown cluster")
}

func TestLinkerDedupesAcrossRules(t *testing.T) {
	l := newLinker(nil, nil, silent)
	l.Put(setDir, mustCompile(t, rule("one", nil)))
	l.Put(setDir, mustCompile(t, rule("two", func(s *Spec) {
		s.Class = "other"
		s.Targets = append(s.Targets, Target{Resource: "configmaps", Name: "'c'"})
	})))
	links, err := l.Lookup(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"secretName":"s1"}}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/s1", "parent other c1//configmaps/ns1/c"}, linkStrings(links))
}
