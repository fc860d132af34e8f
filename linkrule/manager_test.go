package linkrule

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func unstructuredRule(t *testing.T, lr LinkRule, generation int64) *unstructured.Unstructured {
	t.Helper()
	lr.Generation = generation
	lr.UID = "uid-" + "1"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&lr)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

func TestManagerWatchesRulesAndWritesStatus(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GroupVersionResource: "LinkRuleList"},
		unstructuredRule(t, rule("secrets", nil), 1))
	l := newLinker(nil, nil, silent)
	m, err := newManager(Config{StatusInterval: 20 * time.Millisecond}, l, dyn, silent)
	require.NoError(t, err)
	require.NoError(t, m.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, m.Stop(context.Background())) }) // t.Context() is done in Cleanup
	client := dyn.Resource(GroupVersionResource)
	pod := obj("", "pods", "ns1", "p", `{"kind":"Pod","metadata":{"name":"p"},"spec":{"secretName":"s1","other":"o1"}}`)

	lookup := func() []string {
		links, err := l.Lookup(t.Context(), pod)
		require.NoError(t, err)
		return linkStrings(links)
	}
	require.Eventually(t, func() bool { return len(l.rules()) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/s1"}, lookup())

	status := func(name string) (Status, bool) {
		u, err := client.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		var lr LinkRule
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &lr))
		return lr.Status, len(lr.Status.Conditions) == 1
	}
	require.Eventually(t, func() bool { st, ok := status("secrets"); return ok && st.LinksMade == 1 }, 5*time.Second, 10*time.Millisecond)
	st, _ := status("secrets")
	assert.Equal(t, metav1.ConditionTrue, st.Conditions[0].Status)
	assert.Equal(t, ReasonCompiled, st.Conditions[0].Reason)
	assert.EqualValues(t, 1, st.ObservedGeneration)
	assert.EqualValues(t, 1, st.Evaluations)

	// A new generation is compiled again; its counters start over.
	changed := rule("secrets", func(s *Spec) { s.Targets[0].Name = "object.spec.other" })
	_, err = client.Update(t.Context(), unstructuredRule(t, changed, 2), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { r := l.rule(setCluster, "secrets"); return r != nil && r.Generation == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/o1"}, lookup())
	require.Eventually(t, func() bool { st, _ := status("secrets"); return st.ObservedGeneration == 2 && st.LinksMade == 1 }, 5*time.Second, 10*time.Millisecond)

	// A rule that does not compile is reported in its status and does not stop the other.
	broken := rule("broken", func(s *Spec) { s.Targets[0].Name = "object.spec.(" })
	_, err = client.Create(t.Context(), unstructuredRule(t, broken, 1), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := status("broken"); return ok }, 5*time.Second, 10*time.Millisecond)
	st, _ = status("broken")
	assert.Equal(t, metav1.ConditionFalse, st.Conditions[0].Status)
	assert.Equal(t, ReasonCompileFailed, st.Conditions[0].Reason)
	assert.Contains(t, st.Conditions[0].Message, `invalid link rule "broken": spec.targets[0].name: compile`)
	assert.Equal(t, []string{"parent volumes c1//secrets/ns1/o1"}, lookup())

	// Deleted rules stop applying.
	require.NoError(t, client.Delete(t.Context(), "secrets", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return l.rule(setCluster, "secrets") == nil }, 5*time.Second, 10*time.Millisecond)
	assert.Empty(t, lookup())
}

func TestStatusWritesAreBoundedAndFair(t *testing.T) {
	var objs []runtime.Object
	for _, name := range []string{"a", "b", "c"} {
		objs = append(objs, unstructuredRule(t, rule(name, nil), 1))
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GroupVersionResource: "LinkRuleList"}, objs...)
	l := newLinker(nil, nil, silent)
	m, err := newManager(Config{StatusInterval: time.Hour, MaxStatusWritesPerInterval: 1}, l, dyn, silent)
	require.NoError(t, err)
	require.NoError(t, m.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, m.Stop(context.Background())) }) // t.Context() is done in Cleanup
	require.Eventually(t, func() bool { return len(l.rules()) == 3 }, 5*time.Second, 10*time.Millisecond)

	pod := obj("", "pods", "ns1", "p", `{"kind":"Pod","metadata":{"name":"p"},"spec":{"secretName":"s1"}}`)
	written := func() []string {
		var out []string
		for _, name := range []string{"a", "b", "c"} {
			u, err := dyn.Resource(GroupVersionResource).Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			if _, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
				out = append(out, name)
			}
		}
		return out
	}
	// Each pass writes one status; busy rules (whose counters change every pass) do not starve
	// the others.
	for i, want := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}} {
		_, err := l.Lookup(t.Context(), pod)
		require.NoError(t, err)
		m.writeStatuses(t.Context())
		assert.Equal(t, want, written(), "pass %d", i)
	}
}
