package linkrule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// runawayExpr nests exists_one over a list literal: its predicate is false, so no iteration
// costs anything and the cost limit never trips (200^4 iterations).
func runawayExpr() string {
	elems := make([]string, 200)
	for i := range elems {
		elems[i] = fmt.Sprint(i)
	}
	list := "[" + strings.Join(elems, ",") + "]"
	return "object.metadata.name + (" + list + ".exists_one(a, " + list + ".exists_one(b, " + list + ".exists_one(c, " + list + ".exists_one(d, false)))) ? 'x' : 'y')"
}

func TestRunawayExpressionIsStopped(t *testing.T) {
	for _, where := range []string{"condition", "name"} {
		t.Run(where, func(t *testing.T) {
			r, err := Compile(rule("runaway", func(s *Spec) {
				if where == "condition" {
					s.Source.Condition = "(" + runawayExpr() + ") == 'x'"
				} else {
					s.Targets[0].Name = runawayExpr()
				}
			}), "test", CompileOptions{EvalTimeout: 50 * time.Millisecond})
			require.NoError(t, err)
			reader := sdkmetric.NewManualReader()
			l := newLinker(nil, nil, telemetry.Settings{Logger: silent.Logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
			l.Put(setDir, r)

			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := l.Lookup(context.Background(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"}}`))
				done <- err
			}()
			select {
			case err := <-done:
				require.NoError(t, err, "a failing rule does not fail the lookup")
			case <-time.After(10 * time.Second):
				t.Fatal("the runaway expression was not stopped")
			}
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.EqualValues(t, 1, r.Stats().Errors.Load())
			assert.Contains(t, r.Stats().LastError(), "operation interrupted: CEL evaluation took longer than the time limit (linkRules.evalTimeout)")
			assert.EqualValues(t, 1, counterSum(t, reader, "kelemetry.linkrule.errors"))
		})
	}
}

// counterSum returns the sum of an Int64 counter's data points.
func counterSum(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				sum += dp.Value
			}
		}
	}
	return sum
}

// gateLister truncates the list of the Service "cut"; its list for any other Service waits
// until release is closed.
type gateLister struct {
	entered, release chan struct{}
}

func (g gateLister) List(_ context.Context, _ string, _ schema.GroupVersionResource, _ string, sel labels.Selector, _ int) ([]NamespacedName, bool, error) {
	if sel.String() == "app=cut" {
		return []NamespacedName{{Namespace: "ns1", Name: "p0"}}, true, nil
	}
	close(g.entered)
	<-g.release
	return []NamespacedName{{Namespace: "ns1", Name: "p1"}}, false, nil
}

func TestMetricsOfConcurrentLookups(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	gate := gateLister{entered: make(chan struct{}), release: make(chan struct{})}
	l := newLinker(nil, gate, telemetry.Settings{Logger: silent.Logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	l.Put(setDir, mustCompile(t, rule("svc", func(s *Spec) {
		s.Source.Resources = []GroupResource{{Resource: "services"}}
		s.Targets[0] = Target{Version: "v1", Resource: "pods", Selector: "object.spec.selector"}
	})))
	svc := func(name string) string {
		return `{"kind":"Service","metadata":{"name":"` + name + `"},"spec":{"selector":{"app":"` + name + `"}}}`
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := l.Lookup(context.Background(), obj("", "services", "ns1", "slow", svc("slow")))
		assert.NoError(t, err)
	})
	<-gate.entered
	// While the slow lookup waits for its list, another one is truncated.
	_, err := l.Lookup(t.Context(), obj("", "services", "ns1", "cut", svc("cut")))
	require.NoError(t, err)
	close(gate.release)
	wg.Wait()

	r := l.rule(setDir, "svc")
	assert.EqualValues(t, 1, r.Stats().Truncated.Load())
	assert.EqualValues(t, 2, r.Stats().Evaluations.Load())
	assert.EqualValues(t, 1, counterSum(t, reader, "kelemetry.linkrule.truncated"), "only the truncated lookup counts a truncation")
	assert.EqualValues(t, 2, counterSum(t, reader, "kelemetry.linkrule.evaluations"))
	assert.EqualValues(t, 2, counterSum(t, reader, "kelemetry.linkrule.links"))
}

func TestPutSameRuleWhileLookingUp(t *testing.T) {
	l := newLinker(nil, nil, silent)
	r := mustCompile(t, rule("secrets", nil))
	l.Put(setDir, r)
	pod := obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"secretName":"s1"}}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			links, err := l.Lookup(context.Background(), pod)
			assert.NoError(t, err)
			assert.Len(t, links, 1)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
			l.Put(setDir, r)
			l.Replace(setCluster, []*Rule{r})
		}
	}
}

func TestStopHonoursContext(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GroupVersionResource: "LinkRuleList"})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// A list that hangs and ignores its context, like a dead connection without timeouts.
	dyn.PrependReactor("list", Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	m, err := newManager(Config{}, newLinker(nil, nil, silent), dyn, silent)
	require.NoError(t, err)
	require.NoError(t, m.Start(t.Context()))
	require.ErrorIs(t, m.Start(t.Context()), errStarted)
	<-entered

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- m.Stop(ctx) }()
	select {
	case err := <-stopped:
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("Stop ignores its context")
	}

	// Once the list returns, the goroutines end.
	close(release)
	require.NoError(t, m.Stop(t.Context()))
}

// recordingLister records its calls and answers with one object.
type recordingLister struct {
	mu    sync.Mutex
	calls []string
}

func (f *recordingLister) List(_ context.Context, cluster string, gvr schema.GroupVersionResource, ns string, sel labels.Selector, _ int) ([]NamespacedName, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cluster+" "+gvr.Resource+" ns="+ns+" "+sel.String())
	return []NamespacedName{{Name: "node-1"}}, false, nil
}

func TestClusterScopedTargetsHaveNoNamespace(t *testing.T) {
	pod := obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"nodeName":"node-1","pv":"pv-1","cls":"fast"}}`)
	tests := []struct {
		name   string
		target Target
		want   []string
	}{
		{"node by name", Target{Resource: "nodes", Name: "object.spec.nodeName"}, []string{"parent volumes c1//nodes//node-1"}},
		{"persistent volume", Target{Resource: "persistentvolumes", Name: "object.spec.pv"}, []string{"parent volumes c1//persistentvolumes//pv-1"}},
		{"storage class", Target{Group: "storage.k8s.io", Resource: "storageclasses", Name: "object.spec.cls"}, []string{"parent volumes c1/storage.k8s.io/storageclasses//fast"}},
		{"namespaced target keeps the source's namespace", Target{Resource: "secrets", Name: "'s'"}, []string{"parent volumes c1//secrets/ns1/s"}},
		{"an explicit namespace wins", Target{Resource: "secrets", Namespace: "'other'", Name: "'s'"}, []string{"parent volumes c1//secrets/other/s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustCompile(t, rule("r", func(s *Spec) { s.Targets[0] = tt.target }))
			links, err := r.Evaluate(t.Context(), pod, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, linkStrings(links))
		})
	}

	// A selector target of nodes is listed cluster-wide, not under the Pod's namespace.
	lister := &recordingLister{}
	r := mustCompile(t, rule("r", func(s *Spec) {
		s.Targets[0] = Target{Version: "v1", Resource: "nodes", Selector: "'zone=a'"}
	}))
	links, err := r.Evaluate(t.Context(), pod, lister)
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//nodes//node-1"}, linkStrings(links))
	assert.Equal(t, []string{"c1 nodes ns= zone=a"}, lister.calls)
}

func TestEmptySelectorListsNothing(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	c1 := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{pods: "PodList"},
		podObject("ns1", "web-0", map[string]any{"app": "web"}), podObject("ns1", "db-0", map[string]any{"app": "db"}))
	cl := clusterLister{Clusters: kubetest.Clusters{"c1": c1}}
	for _, sel := range []labels.Selector{labels.Everything(), labels.NewSelector(), labels.SelectorFromSet(nil), nil} {
		objs, truncated, err := cl.List(t.Context(), "c1", pods, "ns1", sel, 10)
		require.NoError(t, err)
		assert.Empty(t, objs, "selector %v", sel)
		assert.False(t, truncated)
	}
	objs, _, err := cl.List(t.Context(), "c1", pods, "ns1", labels.SelectorFromSet(labels.Set{"app": "web"}), 10)
	require.NoError(t, err)
	assert.Equal(t, []NamespacedName{{Namespace: "ns1", Name: "web-0"}}, objs)

	// Through a rule: every form of an empty selector gives no target and no list.
	lister := &recordingLister{}
	for _, expr := range []string{"{}", "''", "'  '", "null", "object.spec.?selector.orValue({})", "object.spec.nothing"} {
		r := mustCompile(t, rule("r", func(s *Spec) { s.Targets[0] = Target{Version: "v1", Resource: "pods", Selector: expr} }))
		links, err := r.Evaluate(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"},"spec":{}}`), lister)
		require.NoError(t, err, expr)
		assert.Empty(t, links, expr)
	}
	assert.Empty(t, lister.calls)
}

func TestDirDuplicateNamesFirstFileWins(t *testing.T) {
	dir := t.TempDir()
	doc := func(name, secretExpr string) string {
		return "apiVersion: kelemetry.io/v1alpha1\nkind: LinkRule\nmetadata: {name: " + name + "}\nspec:\n" +
			"  source: {resources: [{group: \"\", resource: pods}]}\n  role: parent\n" +
			"  targets: [{resource: secrets, name: \"" + secretExpr + "\"}]\n"
	}
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	// "rx" in a.yaml does not compile; b.yaml has a valid "rx" and a.yaml a valid "ry", and b.yaml
	// says "ry" again.
	write("a.yaml", doc("rx", "object.spec.(")+"---\n"+doc("ry", "'from-a'"))
	write("b.yaml", doc("rx", "'from-b'")+"---\n"+doc("ry", "'from-b'"))
	logs := &logtest.Buffer{}
	l := newLinker(nil, nil, silent)
	_, err := newManager(Config{Dir: dir, ReloadInterval: -1}, l, nil, telemetry.Settings{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)

	assert.Nil(t, l.rule(setDir, "rx"), "rx belongs to a.yaml, whose rule does not compile")
	require.NotNil(t, l.rule(setDir, "ry"), logs.String())
	assert.Equal(t, "file:"+filepath.Join(dir, "a.yaml"), l.rule(setDir, "ry").Origin)
	out := logs.String()
	assert.Contains(t, out, "link rule rejected")
	assert.Equal(t, 2, strings.Count(out, "name already used"), out)
	assert.Contains(t, out, "rule=rx file="+filepath.Join(dir, "b.yaml")+" first="+filepath.Join(dir, "a.yaml"))
}

func TestDirUnreadableIsLoggedOnce(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "rules")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(goodRules), 0o644))
	logs := &logtest.Buffer{}
	l := newLinker(nil, nil, silent)
	m, err := newManager(Config{Dir: dir, ReloadInterval: -1}, l, nil, telemetry.Settings{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	require.Len(t, l.rules(), 2)

	require.NoError(t, os.RemoveAll(dir))
	for range 5 {
		m.reloadIfChanged(t.Context())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "link rules dir unreadable"))
	assert.Len(t, l.rules(), 2, "the loaded rules are kept")

	// Back, then gone again: logged again.
	require.NoError(t, os.Mkdir(dir, 0o755))
	m.reloadIfChanged(t.Context())
	assert.Empty(t, l.rules(), "an empty directory has no rules")
	require.NoError(t, os.RemoveAll(dir))
	m.reloadIfChanged(t.Context())
	assert.Equal(t, 2, strings.Count(logs.String(), "link rules dir unreadable"))
}

func TestWarningsOfDeletedRulesAreForgotten(t *testing.T) {
	l := newLinker(nil, nil, silent)
	l.Put(setDir, mustCompile(t, rule("broken", func(s *Spec) { s.Targets[0].Name = "object.spec.secretName.substring(100)" })))
	l.Put(setCluster, mustCompile(t, rule("broken2", func(s *Spec) { s.Targets[0].Name = "object.spec.secretName.substring(100)" })))
	_, err := l.Lookup(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"},"spec":{"secretName":"s1"}}`))
	require.NoError(t, err)
	l.warnMu.Lock()
	assert.Len(t, l.warned, 2)
	l.warnMu.Unlock()

	l.Delete(setDir, "broken")
	l.Replace(setCluster, nil)
	l.warnMu.Lock()
	assert.Empty(t, l.warned)
	l.warnMu.Unlock()
}

func TestRepeatedTargetsAreNoTruncation(t *testing.T) {
	r, err := Compile(rule("r", func(s *Spec) {
		s.Targets[0].Name = "['a', 'b', 'a', 'b', string(object.metadata.name), string(object.metadata.?annotations.extra.orValue(''))]"
		s.Targets[0].Resource = "pods" // object.metadata.name is the source itself
	}), "test", CompileOptions{MaxTargetsPerObject: 2})
	require.NoError(t, err)
	links, err := r.Evaluate(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p"}}`), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"parent volumes c1//pods/ns1/a", "parent volumes c1//pods/ns1/b"}, linkStrings(links))
	assert.Zero(t, r.Stats().Truncated.Load(), "every distinct target was linked")

	links, err = r.Evaluate(t.Context(), obj("", "pods", "ns1", "p", `{"metadata":{"name":"p","annotations":{"extra":"c"}}}`), nil)
	require.NoError(t, err)
	assert.Len(t, links, 2)
	assert.EqualValues(t, 1, r.Stats().Truncated.Load(), "c is a third distinct target")
}

func TestFailingStatusWritesAreLoggedOnce(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GroupVersionResource: "LinkRuleList"},
		unstructuredRule(t, rule("a", nil), 1))
	var mu sync.Mutex
	forbidden, patches := true, 0
	dyn.PrependReactor("patch", Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		patches++
		if forbidden {
			return true, nil, apierrors.NewForbidden(GroupVersionResource.GroupResource(), "a", errors.New("no RBAC"))
		}
		return false, nil, nil
	})
	logs := &logtest.Buffer{}
	l := newLinker(nil, nil, silent)
	m, err := newManager(Config{StatusInterval: time.Hour}, l, dyn, telemetry.Settings{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	require.NoError(t, m.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, m.Stop(context.Background())) })
	require.Eventually(t, func() bool { return len(l.rules()) == 1 }, 5*time.Second, 10*time.Millisecond)

	for range 3 {
		m.writeStatuses(t.Context())
	}
	mu.Lock()
	assert.Equal(t, 3, patches, "retried every interval")
	forbidden = false
	mu.Unlock()
	assert.Equal(t, 1, strings.Count(logs.String(), "cannot write link rule status"), logs.String())
	m.writeStatuses(t.Context())
	assert.Contains(t, logs.String(), "link rule status written again")
	st, ok := m.ruleStatus("a")
	require.True(t, ok)
	assert.Equal(t, metav1.ConditionTrue, st.Conditions[0].Status)
}

// The linker's counters are exported at 0 from the start: no_body at once, the by-rule ones for
// each rule as soon as it is put (or replaces a set).
func TestCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	l := newLinker(nil, nil, telemetry.Settings{Logger: silent.Logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	byRule := []string{"kelemetry.linkrule.evaluations", "kelemetry.linkrule.links", "kelemetry.linkrule.errors", "kelemetry.linkrule.truncated"}
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.linkrule.no_body"))
	for _, name := range byRule {
		assert.Empty(t, telemetrytest.Points(t, reader, name), "no rule yet: %s", name)
	}
	l.Put(setDir, mustCompile(t, rule("a", nil)))
	l.Replace(setCluster, []*Rule{mustCompile(t, rule("b", nil)), mustCompile(t, rule("c", nil))})
	for _, name := range byRule {
		assert.Equal(t, telemetrytest.Zeros("rule", "a", "b", "c"), telemetrytest.Points(t, reader, name), name)
	}
}
