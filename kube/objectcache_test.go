package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

func newTestCache(t *testing.T, clusters kube.Clusters, cfg kube.ObjectCacheConfig) (*kube.ObjectCache, *kubetest.Clock, *kubetest.Metrics) {
	t.Helper()
	m := kubetest.NewMetrics()
	c, err := kube.NewObjectCache(clusters, cfg, telemetry.Settings{MeterProvider: m.Provider})
	require.NoError(t, err)
	clock := kubetest.NewClock()
	c.SetClock(clock.Now)
	return c, clock, m
}

func TestObjectCacheHitAndStrip(t *testing.T) {
	dyn := kubetest.NewDynamic()
	obj := kubetest.PodObject("default", "web", map[string]any{
		"spec":   map[string]any{"nodeName": "n1"},
		"status": map[string]any{"phase": "Running"},
	})
	meta := obj["metadata"].(map[string]any)
	meta["managedFields"] = []any{map[string]any{"manager": "kubectl"}}
	meta["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "me"}
	dyn.Add(kubetest.PodsGVR, obj)
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})

	body, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.NotContains(t, got, "status")
	assert.Equal(t, map[string]any{"nodeName": "n1"}, got["spec"])
	gotMeta := got["metadata"].(map[string]any)
	assert.NotContains(t, gotMeta, "managedFields")
	assert.Equal(t, map[string]any{"keep": "me"}, gotMeta["annotations"])

	body2, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.NoError(t, err)
	assert.Equal(t, string(body), string(body2))
	assert.EqualValues(t, 1, dyn.Gets(), "second Get is a hit")
	assert.Equal(t, []string{"0"}, dyn.ResourceVersions(), "GET reads the watch cache")
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.objectcache.requests", "result", "fetched"))
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.objectcache.requests", "result", "hit"))
}

func TestObjectCacheTTL(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", "web", nil))
	c, clock, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{TTL: time.Minute})
	ref := kubetest.PodRef("c1", "default", "web")

	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	clock.Advance(59 * time.Second)
	_, err = c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 1, dyn.Gets())

	clock.Advance(2 * time.Second)
	_, err = c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 2, dyn.Gets(), "expired entry is fetched again")
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.objectcache.evictions", "reason", "expired"))
}

func TestObjectCacheNegative(t *testing.T) {
	dyn := kubetest.NewDynamic()
	c, clock, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{NegativeTTL: 10 * time.Second})
	ref := kubetest.PodRef("c1", "default", "gone")

	for range 5 {
		_, err := c.Get(context.Background(), ref)
		require.ErrorIs(t, err, kube.ErrObjectNotFound)
		clock.Advance(time.Second)
	}
	assert.EqualValues(t, 1, dyn.Gets(), "404 is remembered")
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.objectcache.requests", "result", "not_found"))
	assert.EqualValues(t, 4, m.Count(t, "kelemetry.objectcache.requests", "result", "negative_hit"))

	clock.Advance(6 * time.Second)
	dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", "gone", nil))
	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err, "after NegativeTTL the object is fetched again")
	assert.EqualValues(t, 2, dyn.Gets())
}

func TestObjectCacheErrorsAreNotCached(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Err = errors.New("connection refused")
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "default", "web")
	for range 2 {
		_, err := c.Get(context.Background(), ref)
		require.Error(t, err)
		assert.NotErrorIs(t, err, kube.ErrObjectNotFound)
	}
	assert.EqualValues(t, 2, dyn.Gets())
	assert.EqualValues(t, 2, m.Count(t, "kelemetry.objectcache.requests", "result", "error"))
}

func TestObjectCacheClusterInKey(t *testing.T) {
	d1, d2 := kubetest.NewDynamic(), kubetest.NewDynamic()
	d1.Add(kubetest.PodsGVR, kubetest.PodObject("default", "web", map[string]any{"spec": map[string]any{"nodeName": "in-c1"}}))
	d2.Add(kubetest.PodsGVR, kubetest.PodObject("default", "web", map[string]any{"spec": map[string]any{"nodeName": "in-c2"}}))
	c, _, _ := newTestCache(t, kubetest.Clusters{"c1": d1, "c2": d2}, kube.ObjectCacheConfig{})

	b1, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.NoError(t, err)
	b2, err := c.Get(context.Background(), kubetest.PodRef("c2", "default", "web"))
	require.NoError(t, err)
	assert.Contains(t, string(b1), "in-c1")
	assert.Contains(t, string(b2), "in-c2")
	assert.Equal(t, 2, c.Len())

	_, err = c.Get(context.Background(), kubetest.PodRef("c3", "default", "web"))
	require.ErrorIs(t, err, kube.ErrUnknownCluster)
}

func TestObjectCacheConcurrentMisses(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", "web", nil))
	dyn.Release = make(chan struct{})
	dyn.Started = make(chan struct{}, 100)
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "default", "web")

	const callers = 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.Get(context.Background(), ref)
			errs <- err
		})
	}
	<-dyn.Started // the one GET is running; the others pile up behind it
	require.Eventually(t, func() bool { return kube.InflightWaiters(c, ref) == callers }, 5*time.Second, time.Millisecond)
	close(dyn.Release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, dyn.Gets())
	assert.EqualValues(t, callers, m.Count(t, "kelemetry.objectcache.requests", "", ""))
}

func TestObjectCacheWaiterCancel(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", "web", nil))
	dyn.Release = make(chan struct{})
	dyn.Started = make(chan struct{}, 10)
	c, _, _ := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "default", "web")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, ref)
		done <- err
	}()
	<-dyn.Started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "a caller stops waiting when its context ends")

	// The abandoned GET was cancelled and forgotten: a new caller starts a fresh one.
	close(dyn.Release)
	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 2, dyn.Gets())
}

func TestObjectCacheFetchTimeout(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Release = make(chan struct{}) // never released
	c, _, _ := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{FetchTimeout: 20 * time.Millisecond})
	_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Stop cancels a GET that would hang until its fetch timeout and waits for its goroutine; later
// lookups fail at once.
func TestObjectCacheStop(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Release = make(chan struct{}) // never released
	dyn.Started = make(chan struct{}, 10)
	c, _, _ := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{FetchTimeout: time.Hour})
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
		done <- err
	}()
	<-dyn.Started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Stop(ctx))
	require.ErrorIs(t, <-done, context.Canceled)
	_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "other"))
	require.ErrorIs(t, err, context.Canceled, "stopped")
}

func TestObjectCacheLRUBound(t *testing.T) {
	dyn := kubetest.NewDynamic()
	for i := range 5 {
		dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", fmt.Sprint("p", i), nil))
	}
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{Size: 3})
	for i := range 5 {
		_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", fmt.Sprint("p", i)))
		require.NoError(t, err)
	}
	assert.Equal(t, 3, c.Len())
	assert.EqualValues(t, 2, m.Count(t, "kelemetry.objectcache.evictions", "reason", "size"))

	_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", "p0"))
	require.NoError(t, err)
	assert.EqualValues(t, 6, dyn.Gets(), "the oldest entry was evicted")
	_, err = c.Get(context.Background(), kubetest.PodRef("c1", "default", "p4"))
	require.NoError(t, err)
	assert.EqualValues(t, 6, dyn.Gets(), "the newest entry is still cached")
}

func TestObjectCacheRejects(t *testing.T) {
	_, err := kube.NewObjectCache(nil, kube.ObjectCacheConfig{}, telemetry.Settings{})
	require.Error(t, err)
	_, err = kube.NewObjectCache(kubetest.Clusters{}, kube.ObjectCacheConfig{Size: -1}, telemetry.Settings{})
	require.Error(t, err)

	c, _, _ := newTestCache(t, kubetest.Clusters{}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "default", "web")
	ref.Version = ""
	_, err = c.Get(context.Background(), ref)
	require.ErrorIs(t, err, kube.ErrIncompleteRef)
}

func TestObjectCacheClusterScoped(t *testing.T) {
	dyn := kubetest.NewDynamic()
	nodes := kubetest.PodsGVR.GroupVersion().WithResource("nodes")
	dyn.Add(nodes, map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"}})
	c, _, _ := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "", "n1")
	ref.Resource = "nodes"
	body, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"Node"`)
}

// TestObjectCacheBytesBound fills the cache with large objects: it keeps what fits in MaxBytes,
// least recently used out first, and never caches an object larger than the whole bound.
func TestObjectCacheBytesBound(t *testing.T) {
	dyn := kubetest.NewDynamic()
	big := func(name string, n int) {
		dyn.Add(kubetest.PodsGVR, kubetest.PodObject("default", name, map[string]any{
			"spec": map[string]any{"blob": strings.Repeat("x", n)},
		}))
	}
	for i := range 10 {
		big(fmt.Sprint("p", i), 100<<10)
	}
	big("huge", 600<<10)
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{Size: 1000, MaxBytes: 512 << 10})
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	ctx := context.Background()
	for i := range 10 {
		_, err := c.Get(ctx, kubetest.PodRef("c1", "default", fmt.Sprint("p", i)))
		require.NoError(t, err)
		assert.LessOrEqual(t, c.Bytes(), int64(512<<10), "after object %d", i)
	}
	assert.Equal(t, 5, c.Len(), "five 100 KB bodies fit in 512 KiB")
	assert.EqualValues(t, 5, m.Count(t, "kelemetry.objectcache.evictions", "reason", "bytes"))
	assert.Zero(t, m.Count(t, "kelemetry.objectcache.evictions", "reason", "size"))

	gets := dyn.Gets()
	_, err := c.Get(ctx, kubetest.PodRef("c1", "default", "p9"))
	require.NoError(t, err)
	_, err = c.Get(ctx, kubetest.PodRef("c1", "default", "p0"))
	require.NoError(t, err)
	assert.Equal(t, gets+1, dyn.Gets(), "the newest is cached, the oldest was evicted")

	before := c.Bytes()
	body, err := c.Get(ctx, kubetest.PodRef("c1", "default", "huge"))
	require.NoError(t, err)
	assert.Greater(t, len(body), 512<<10, "a body over the bound is still returned")
	assert.Equal(t, before, c.Bytes(), "but not cached")
	_, err = c.Get(ctx, kubetest.PodRef("c1", "default", "huge"))
	require.NoError(t, err)
	assert.Equal(t, gets+3, dyn.Gets())
}

// A GET refused by RBAC is a configuration error, not a transient one: it is logged at Warn with
// the resource to grant (rate-limited), where a Debug "linker failed" line alone would hide it.
func TestObjectCacheReportsForbidden(t *testing.T) {
	dyn := kubetest.NewDynamic()
	dyn.Err = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web",
		errors.New(`User "system:serviceaccount:kelemetry:kelemetry" cannot get resource "deployments"`))
	rec := &logtest.Recorder{}
	m := kubetest.NewMetrics()
	c, err := kube.NewObjectCache(kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{},
		telemetry.Settings{MeterProvider: m.Provider, Logger: slog.New(rec)})
	require.NoError(t, err)
	for i := range 20 {
		_, err := c.Get(context.Background(), kubetest.PodRef("c1", "default", fmt.Sprintf("web-%d", i)))
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(errors.Unwrap(err)) || strings.Contains(err.Error(), "forbidden"), err)
	}
	warns := rec.Count(slog.LevelWarn)
	assert.GreaterOrEqual(t, warns, 1, "a refused GET is reported")
	assert.LessOrEqual(t, warns, 5, "rate-limited")
	var msg string
	for _, r := range rec.Records() {
		if r.Level == slog.LevelWarn {
			msg = r.Message
			r.Attrs(func(a slog.Attr) bool { msg += " " + a.Key + "=" + a.Value.String(); return true })
			break
		}
	}
	assert.Contains(t, msg, "permission denied")
	assert.Contains(t, msg, "resource=pods")
	assert.Contains(t, msg, "cluster=c1")

	// Other errors stay quiet (the linkers retry and count them).
	rec2 := &logtest.Recorder{}
	dyn2 := kubetest.NewDynamic()
	dyn2.Err = errors.New("connection refused")
	c2, err := kube.NewObjectCache(kubetest.Clusters{"c1": dyn2}, kube.ObjectCacheConfig{}, telemetry.Settings{Logger: slog.New(rec2)})
	require.NoError(t, err)
	_, err = c2.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.Error(t, err)
	assert.Zero(t, rec2.Count(slog.LevelWarn))
}

// Secrets are never fetched, whatever the RBAC: a lookup answers "not found" at once, counted as
// withheld, with no request to the API server and no permission warning.
func TestObjectCacheNeverFetchesSecrets(t *testing.T) {
	dyn := kubetest.NewDynamic()
	c, _, m := newTestCache(t, kubetest.Clusters{"c1": dyn}, kube.ObjectCacheConfig{})
	ref := kubetest.PodRef("c1", "default", "creds")
	ref.Resource = "secrets"
	_, err := c.Get(context.Background(), ref)
	require.ErrorIs(t, err, kube.ErrObjectNotFound)
	assert.Contains(t, err.Error(), "never fetched")
	assert.EqualValues(t, 0, dyn.Gets())
	assert.EqualValues(t, 1, m.Count(t, "kelemetry.objectcache.requests", "result", "withheld"))
}

// The object cache's and the discovery mapper's counters are exported at 0 from the start, each
// result and reason included.
func TestKubeCountersStartAtZero(t *testing.T) {
	_, _, m := newTestCache(t, kubetest.Clusters{}, kube.ObjectCacheConfig{})
	assert.Equal(t, telemetrytest.Zeros("result", "hit", "negative_hit", "fetched", "not_found", "error", "withheld"),
		telemetrytest.Points(t, m.Reader, "kelemetry.objectcache.requests"))
	assert.Equal(t, telemetrytest.Zeros("reason", "size", "bytes", "expired"), telemetrytest.Points(t, m.Reader, "kelemetry.objectcache.evictions"))
	_, _, dm := newTestDiscoveryMapper(t, nil)
	assert.Equal(t, telemetrytest.Zeros("result", "ok", "partial", "error"), telemetrytest.Points(t, dm.Reader, "kelemetry.linker.discovery.refreshes"))
}
