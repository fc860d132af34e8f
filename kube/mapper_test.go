package kube_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestStaticMapper(t *testing.T) {
	tests := []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", true},
		{schema.GroupVersionKind{Kind: "Node"}, "nodes", false},
		{schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}, "persistentvolumes", false},
		{schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}, "endpoints", true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, "replicasets", true},
		{schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "CronJob"}, "cronjobs", true},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, "ingresses", true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
		{schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, "poddisruptionbudgets", true},
		{schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, "storageclasses", false},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, "customresourcedefinitions", false},
		{schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}, "endpointslices", true},
		{schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, "leases", true},
		{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"}, "validatingwebhookconfigurations", false},
		// Guesses: unknown scope is reported as namespaced.
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "widgets", true},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Rollout"}, "rollouts", true},
	}
	m := kube.NewStaticMapper()
	for _, tt := range tests {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			gvr, namespaced, err := m.ResourceFor(context.Background(), "any", tt.gvk)
			require.NoError(t, err)
			assert.Equal(t, tt.resource, gvr.Resource)
			assert.Equal(t, tt.gvk.Group, gvr.Group)
			assert.Equal(t, tt.namespaced, namespaced)
			if tt.gvk.Version == "" {
				assert.Equal(t, "v1", gvr.Version)
			} else {
				assert.Equal(t, tt.gvk.Version, gvr.Version)
			}
		})
	}
	_, _, err := m.ResourceFor(context.Background(), "any", schema.GroupVersionKind{Version: "v1"})
	require.ErrorIs(t, err, kube.ErrInvalidKind)
	assert.True(t, m.Known(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}))
	assert.False(t, m.Known(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}))
}

func TestGuessResource(t *testing.T) {
	for kind, want := range map[string]string{
		"Widget":        "widgets",
		"NetworkPolicy": "networkpolicies",
		"Gateway":       "gateways",
		"Ingress":       "ingresses",
		"Box":           "boxes",
		"Quiz":          "quizes", //nolint:misspell // the naive plural is what GuessResource makes
		"Batch":         "batches",
		"Mesh":          "meshes",
		"Y":             "ys",
		"":              "",
	} {
		assert.Equal(t, want, kube.GuessResource(kind), kind)
	}
}

// fakeDiscoverer answers ServerGroupsAndResources from settable results and counts calls.
type fakeDiscoverer struct {
	mu     sync.Mutex
	groups []*metav1.APIGroup
	lists  []*metav1.APIResourceList
	err    error
	calls  atomic.Int64
	block  chan struct{} // when set, calls wait for it
}

func (d *fakeDiscoverer) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	d.calls.Add(1)
	d.mu.Lock()
	block := d.block
	d.mu.Unlock()
	if block != nil {
		<-block
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.groups, d.lists, d.err
}

func (d *fakeDiscoverer) set(groups []*metav1.APIGroup, lists []*metav1.APIResourceList, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.groups, d.lists, d.err = groups, lists, err
}

type fakeDiscoveryClusters map[string]kube.ResourceDiscoverer

func (c fakeDiscoveryClusters) Discovery(cluster string) (kube.ResourceDiscoverer, error) {
	d, ok := c[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", cluster, kube.ErrUnknownCluster)
	}
	return d, nil
}

// apiGroup builds discovery results: a group with versions (the first preferred), each serving
// the given kind -> resource (a "*" prefix on the resource means cluster-scoped).
func apiGroup(group string, versions []string, kinds map[string]string) (*metav1.APIGroup, []*metav1.APIResourceList) {
	g := &metav1.APIGroup{Name: group}
	var lists []*metav1.APIResourceList
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
		list := &metav1.APIResourceList{GroupVersion: gv.String()}
		for kind, res := range kinds {
			namespaced := res[0] != '*'
			if !namespaced {
				res = res[1:]
			}
			list.APIResources = append(list.APIResources,
				metav1.APIResource{Name: res, Kind: kind, Namespaced: namespaced},
				metav1.APIResource{Name: res + "/status", Kind: kind, Namespaced: namespaced})
		}
		lists = append(lists, list)
	}
	g.PreferredVersion = g.Versions[0]
	return g, lists
}

func newTestDiscoveryMapper(t *testing.T, clusters kube.DiscoveryClusters) (*kube.DiscoveryMapper, *kubetest.Clock, *kubetest.Metrics) {
	t.Helper()
	m := kubetest.NewMetrics()
	dm, err := kube.NewDiscoveryMapper(clusters, kube.DiscoveryConfig{}, telemetry.Settings{MeterProvider: m.Provider})
	require.NoError(t, err)
	clock := kubetest.NewClock()
	dm.SetClock(clock.Now)
	return dm, clock, m
}

func TestDiscoveryMapper(t *testing.T) {
	core, coreLists := apiGroup("", []string{"v1"}, map[string]string{"Pod": "pods", "Node": "*nodes"})
	crd, crdLists := apiGroup("example.com", []string{"v2", "v1"}, map[string]string{"Fleet": "*fleetz"})
	d := &fakeDiscoverer{}
	d.set([]*metav1.APIGroup{core, crd}, append(coreLists, crdLists...), nil)
	dm, _, _ := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	ctx := context.Background()

	gvr, namespaced, err := dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"})
	require.NoError(t, err)
	assert.Equal(t, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "fleetz"}, gvr, "a non-preferred version resolves")
	assert.False(t, namespaced, "discovery knows the real scope")

	gvr, _, err = dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "example.com", Version: "v9", Kind: "Fleet"})
	require.NoError(t, err)
	assert.Equal(t, "fleetz", gvr.Resource, "an unserved version maps by group and kind")
	assert.Equal(t, "v9", gvr.Version)

	gvr, namespaced, err = dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Kind: "Pod"})
	require.NoError(t, err)
	assert.Equal(t, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, gvr)
	assert.True(t, namespaced)

	gvr, namespaced, err = dm.ResourceFor(ctx, "nowhere", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"})
	require.NoError(t, err)
	assert.Equal(t, "fleets", gvr.Resource, "a cluster without discovery uses the static mapper")
	assert.True(t, namespaced)
}

func TestDiscoveryMapperNegativeCache(t *testing.T) {
	core, coreLists := apiGroup("", []string{"v1"}, map[string]string{"Pod": "pods"})
	d := &fakeDiscoverer{}
	d.set([]*metav1.APIGroup{core}, coreLists, nil)
	dm, clock, m := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	ctx := context.Background()
	unknown := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"}

	for range 100 {
		gvr, _, err := dm.ResourceFor(ctx, "c1", unknown)
		require.NoError(t, err)
		assert.Equal(t, "fleets", gvr.Resource, "falls back to the guess")
	}
	assert.EqualValues(t, 1, d.calls.Load(), "an unknown kind does not re-discover within a minute")

	// The CRD appears; after the interval, one lookup re-discovers and finds it.
	crd, crdLists := apiGroup("example.com", []string{"v1"}, map[string]string{"Fleet": "*fleetz"})
	d.set([]*metav1.APIGroup{core, crd}, append(coreLists, crdLists...), nil)
	clock.Advance(30 * time.Second)
	gvr, _, err := dm.ResourceFor(ctx, "c1", unknown)
	require.NoError(t, err)
	assert.Equal(t, "fleets", gvr.Resource)
	assert.EqualValues(t, 1, d.calls.Load())

	clock.Advance(31 * time.Second)
	gvr, namespaced, err := dm.ResourceFor(ctx, "c1", unknown)
	require.NoError(t, err)
	assert.Equal(t, "fleetz", gvr.Resource)
	assert.False(t, namespaced)
	assert.EqualValues(t, 2, d.calls.Load())
	assert.EqualValues(t, 2, m.Count(t, "kelemetry.linker.discovery.refreshes", "result", "ok"))

	// Known kinds never re-discover before MaxAge; after it, the next lookup refreshes once.
	for range 10 {
		_, _, err := dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
		require.NoError(t, err)
	}
	assert.EqualValues(t, 2, d.calls.Load())
	clock.Advance(kube.DefaultDiscoveryMaxAge + time.Second)
	for range 10 {
		gvr, _, err := dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
		require.NoError(t, err)
		assert.Equal(t, "pods", gvr.Resource, "the stale answer is used while discovery runs")
	}
	require.Eventually(t, func() bool { return m.Count(t, "kelemetry.linker.discovery.refreshes", "result", "ok") == 3 }, time.Second, time.Millisecond)
	assert.EqualValues(t, 3, d.calls.Load())
}

func TestDiscoveryMapperWaiterCancel(t *testing.T) {
	d := &fakeDiscoverer{block: make(chan struct{})}
	defer close(d.block)
	dm, _, _ := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gvr, namespaced, err := dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"})
	require.NoError(t, err, "a hanging discovery does not hold the caller")
	assert.Equal(t, "daemonsets", gvr.Resource)
	assert.True(t, namespaced)
}

// Stop waits for a running discovery: it reports the deadline while the discovery hangs and
// returns once it ended.
func TestDiscoveryMapperStop(t *testing.T) {
	d := &fakeDiscoverer{block: make(chan struct{})}
	dm, _, _ := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.calls.Load() == 1 }, time.Second, time.Millisecond)

	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, dm.Stop(short), context.DeadlineExceeded, "the discovery still runs")
	close(d.block)
	require.NoError(t, dm.Stop(context.Background()))
}

func TestDiscoveryMapperNoStampede(t *testing.T) {
	// In a bubble, synctest.Wait tells when every caller waits behind the running discovery.
	synctest.Test(t, func(t *testing.T) {
		crd, crdLists := apiGroup("example.com", []string{"v1"}, map[string]string{"Fleet": "fleetz"})
		d := &fakeDiscoverer{block: make(chan struct{})}
		d.set([]*metav1.APIGroup{crd}, crdLists, nil)
		dm, _, _ := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})

		const callers = 20
		var wg sync.WaitGroup
		results := make(chan string, callers)
		for range callers {
			wg.Go(func() {
				gvr, _, err := dm.ResourceFor(context.Background(), "c1", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"})
				assert.NoError(t, err)
				results <- gvr.Resource
			})
		}
		synctest.Wait() // one discovery blocks; every other caller waits for it
		require.EqualValues(t, 1, d.calls.Load())
		close(d.block)
		wg.Wait()
		close(results)
		for r := range results {
			assert.Equal(t, "fleetz", r, "waiters get the discovered answer")
		}
		assert.EqualValues(t, 1, d.calls.Load())
	})
}

func TestDiscoveryMapperPartialFailure(t *testing.T) {
	core, coreLists := apiGroup("", []string{"v1"}, map[string]string{"Pod": "pods"})
	crd, crdLists := apiGroup("example.com", []string{"v1"}, map[string]string{"Fleet": "*fleetz"})
	metrics, metricsLists := apiGroup("metrics.example.com", []string{"v1"}, map[string]string{"Usage": "usages"})
	d := &fakeDiscoverer{}
	d.set([]*metav1.APIGroup{core, crd, metrics}, append(append(coreLists, crdLists...), metricsLists...), nil)
	dm, clock, m := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	ctx := context.Background()
	fleet := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"}

	gvr, _, err := dm.ResourceFor(ctx, "c1", fleet)
	require.NoError(t, err)
	assert.Equal(t, "fleetz", gvr.Resource)

	// Next discovery: example.com/v1 fails (listed, no resources), a new group appears.
	extra, extraLists := apiGroup("new.example.com", []string{"v1"}, map[string]string{"Thing": "thingz"})
	d.set([]*metav1.APIGroup{core, crd, metrics, extra}, append(append(coreLists, metricsLists...), extraLists...),
		errors.New("unable to retrieve the complete list of server APIs: example.com/v1: service unavailable"))
	clock.Advance(2 * time.Minute)
	gvr, _, err = dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "new.example.com", Version: "v1", Kind: "Thing"})
	require.NoError(t, err)
	assert.Equal(t, "thingz", gvr.Resource, "the partial results are used")
	gvr, namespaced, err := dm.ResourceFor(ctx, "c1", fleet)
	require.NoError(t, err)
	assert.Equal(t, "fleetz", gvr.Resource, "the failed group keeps its earlier results")
	assert.False(t, namespaced)
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.linker.discovery.refreshes", "result", "partial"))

	// Total failure keeps everything.
	d.set(nil, nil, errors.New("connection refused"))
	clock.Advance(2 * time.Minute)
	_, _, err = dm.ResourceFor(ctx, "c1", schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "Other"})
	require.NoError(t, err)
	assert.EqualValues(t, 3, d.calls.Load())
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.linker.discovery.refreshes", "result", "error"))
	gvr, _, err = dm.ResourceFor(ctx, "c1", fleet)
	require.NoError(t, err)
	assert.Equal(t, "fleetz", gvr.Resource)
}

func TestResourceScopeKnown(t *testing.T) {
	ctx := context.Background()
	fleet := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Fleet"}
	endpoints := schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}

	_, namespaced, known, err := kube.ResourceScope(ctx, kube.NewStaticMapper(), "c1", endpoints)
	require.NoError(t, err)
	assert.True(t, namespaced && known, "a built-in kind's scope is known")
	_, namespaced, known, err = kube.ResourceScope(ctx, kube.NewStaticMapper(), "c1", fleet)
	require.NoError(t, err)
	assert.True(t, namespaced, "guessed namespaced")
	assert.False(t, known, "an unknown kind's scope is a guess")

	crd, crdLists := apiGroup("example.com", []string{"v1"}, map[string]string{"Fleet": "*fleets"})
	d := &fakeDiscoverer{}
	d.set(nil, nil, errors.New("discovery down"))
	dm, clock, _ := newTestDiscoveryMapper(t, fakeDiscoveryClusters{"c1": d})
	_, namespaced, known, err = kube.ResourceScope(ctx, dm, "c1", fleet)
	require.NoError(t, err)
	assert.True(t, namespaced)
	assert.False(t, known, "failed discovery: the static guess")
	_, _, known, err = kube.ResourceScope(ctx, dm, "c1", endpoints)
	require.NoError(t, err)
	assert.True(t, known, "failed discovery: the built-in table still knows Endpoints")

	d.set([]*metav1.APIGroup{crd}, crdLists, nil)
	clock.Advance(time.Hour)
	_, namespaced, known, err = kube.ResourceScope(ctx, dm, "c1", fleet)
	require.NoError(t, err)
	assert.False(t, namespaced)
	assert.True(t, known, "discovered")

	_, _, known, err = kube.ResourceScope(ctx, dm, "c1", schema.GroupVersionKind{})
	require.ErrorIs(t, err, kube.ErrInvalidKind)
	assert.False(t, known)
}
