package linker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestCache(t *testing.T, clusters Clusters, cfg ObjectCacheConfig) (*ObjectCache, *fakeClock, *metrics) {
	t.Helper()
	m := newMetrics()
	c, err := NewObjectCache(clusters, cfg, nil, m.mp)
	require.NoError(t, err)
	clock := newFakeClock()
	c.now = clock.Now
	return c, clock, m
}

func TestObjectCacheHitAndStrip(t *testing.T) {
	dyn := newFakeDynamic()
	obj := podObject("default", "web", map[string]any{
		"spec":   map[string]any{"nodeName": "n1"},
		"status": map[string]any{"phase": "Running"},
	})
	meta := obj["metadata"].(map[string]any)
	meta["managedFields"] = []any{map[string]any{"manager": "kubectl"}}
	meta["annotations"] = map[string]any{lastAppliedAnnotation: "{}", "keep": "me"}
	dyn.add(podsGVR, obj)
	c, _, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{})

	body, err := c.Get(context.Background(), podRef("c1", "default", "web"))
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	assert.NotContains(t, got, "status")
	assert.Equal(t, map[string]any{"nodeName": "n1"}, got["spec"])
	gotMeta := got["metadata"].(map[string]any)
	assert.NotContains(t, gotMeta, "managedFields")
	assert.Equal(t, map[string]any{"keep": "me"}, gotMeta["annotations"])

	body2, err := c.Get(context.Background(), podRef("c1", "default", "web"))
	require.NoError(t, err)
	assert.Equal(t, string(body), string(body2))
	assert.EqualValues(t, 1, dyn.gets.Load(), "second Get is a hit")
	assert.Equal(t, []string{"0"}, dyn.rvs, "GET reads the watch cache")
	assert.EqualValues(t, 1, m.count(t, "kelemetry.objectcache.requests", "result", "fetched"))
	assert.EqualValues(t, 1, m.count(t, "kelemetry.objectcache.requests", "result", "hit"))
}

func TestObjectCacheTTL(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.add(podsGVR, podObject("default", "web", nil))
	c, clock, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{TTL: time.Minute})
	ref := podRef("c1", "default", "web")

	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	clock.Advance(59 * time.Second)
	_, err = c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 1, dyn.gets.Load())

	clock.Advance(2 * time.Second)
	_, err = c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 2, dyn.gets.Load(), "expired entry is fetched again")
	assert.EqualValues(t, 1, m.count(t, "kelemetry.objectcache.evictions", "reason", "expired"))
}

func TestObjectCacheNegative(t *testing.T) {
	dyn := newFakeDynamic()
	c, clock, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{NegativeTTL: 10 * time.Second})
	ref := podRef("c1", "default", "gone")

	for range 5 {
		_, err := c.Get(context.Background(), ref)
		require.ErrorIs(t, err, ErrObjectNotFound)
		clock.Advance(time.Second)
	}
	assert.EqualValues(t, 1, dyn.gets.Load(), "404 is remembered")
	assert.EqualValues(t, 1, m.count(t, "kelemetry.objectcache.requests", "result", "not_found"))
	assert.EqualValues(t, 4, m.count(t, "kelemetry.objectcache.requests", "result", "negative_hit"))

	clock.Advance(6 * time.Second)
	dyn.add(podsGVR, podObject("default", "gone", nil))
	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err, "after NegativeTTL the object is fetched again")
	assert.EqualValues(t, 2, dyn.gets.Load())
}

func TestObjectCacheErrorsAreNotCached(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.err = errors.New("connection refused")
	c, _, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{})
	ref := podRef("c1", "default", "web")
	for range 2 {
		_, err := c.Get(context.Background(), ref)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrObjectNotFound)
	}
	assert.EqualValues(t, 2, dyn.gets.Load())
	assert.EqualValues(t, 2, m.count(t, "kelemetry.objectcache.requests", "result", "error"))
}

func TestObjectCacheClusterInKey(t *testing.T) {
	d1, d2 := newFakeDynamic(), newFakeDynamic()
	d1.add(podsGVR, podObject("default", "web", map[string]any{"spec": map[string]any{"nodeName": "in-c1"}}))
	d2.add(podsGVR, podObject("default", "web", map[string]any{"spec": map[string]any{"nodeName": "in-c2"}}))
	c, _, _ := newTestCache(t, fakeClusters{"c1": d1, "c2": d2}, ObjectCacheConfig{})

	b1, err := c.Get(context.Background(), podRef("c1", "default", "web"))
	require.NoError(t, err)
	b2, err := c.Get(context.Background(), podRef("c2", "default", "web"))
	require.NoError(t, err)
	assert.Contains(t, string(b1), "in-c1")
	assert.Contains(t, string(b2), "in-c2")
	assert.Equal(t, 2, c.Len())

	_, err = c.Get(context.Background(), podRef("c3", "default", "web"))
	require.ErrorIs(t, err, ErrUnknownCluster)
}

func TestObjectCacheConcurrentMisses(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.add(podsGVR, podObject("default", "web", nil))
	dyn.release = make(chan struct{})
	dyn.started = make(chan struct{}, 100)
	c, _, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{})
	ref := podRef("c1", "default", "web")

	const callers = 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.Get(context.Background(), ref)
			errs <- err
		})
	}
	<-dyn.started // the one GET is running; the others pile up behind it
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		call := c.inflight[ref.Key()]
		return call != nil && call.waiters == callers
	}, 5*time.Second, time.Millisecond)
	close(dyn.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, dyn.gets.Load())
	assert.EqualValues(t, callers, m.count(t, "kelemetry.objectcache.requests", "", ""))
}

func TestObjectCacheWaiterCancel(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.add(podsGVR, podObject("default", "web", nil))
	dyn.release = make(chan struct{})
	dyn.started = make(chan struct{}, 10)
	c, _, _ := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{})
	ref := podRef("c1", "default", "web")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, ref)
		done <- err
	}()
	<-dyn.started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled, "a caller stops waiting when its context ends")

	// The abandoned GET was cancelled and forgotten: a new caller starts a fresh one.
	close(dyn.release)
	_, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.EqualValues(t, 2, dyn.gets.Load())
}

func TestObjectCacheFetchTimeout(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.release = make(chan struct{}) // never released
	c, _, _ := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{FetchTimeout: 20 * time.Millisecond})
	_, err := c.Get(context.Background(), podRef("c1", "default", "web"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Stop cancels a GET that would hang until its fetch timeout and waits for its goroutine; later
// lookups fail at once.
func TestObjectCacheStop(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.release = make(chan struct{}) // never released
	dyn.started = make(chan struct{}, 10)
	c, _, _ := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{FetchTimeout: time.Hour})
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(context.Background(), podRef("c1", "default", "web"))
		done <- err
	}()
	<-dyn.started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Stop(ctx))
	require.ErrorIs(t, <-done, context.Canceled)
	_, err := c.Get(context.Background(), podRef("c1", "default", "other"))
	require.ErrorIs(t, err, context.Canceled, "stopped")
}

func TestObjectCacheLRUBound(t *testing.T) {
	dyn := newFakeDynamic()
	for i := range 5 {
		dyn.add(podsGVR, podObject("default", fmt.Sprint("p", i), nil))
	}
	c, _, m := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{Size: 3})
	for i := range 5 {
		_, err := c.Get(context.Background(), podRef("c1", "default", fmt.Sprint("p", i)))
		require.NoError(t, err)
	}
	assert.Equal(t, 3, c.Len())
	assert.EqualValues(t, 2, m.count(t, "kelemetry.objectcache.evictions", "reason", "size"))

	_, err := c.Get(context.Background(), podRef("c1", "default", "p0"))
	require.NoError(t, err)
	assert.EqualValues(t, 6, dyn.gets.Load(), "the oldest entry was evicted")
	_, err = c.Get(context.Background(), podRef("c1", "default", "p4"))
	require.NoError(t, err)
	assert.EqualValues(t, 6, dyn.gets.Load(), "the newest entry is still cached")
}

func TestObjectCacheRejects(t *testing.T) {
	_, err := NewObjectCache(nil, ObjectCacheConfig{}, nil, nil)
	require.Error(t, err)
	_, err = NewObjectCache(fakeClusters{}, ObjectCacheConfig{Size: -1}, nil, nil)
	require.Error(t, err)

	c, _, _ := newTestCache(t, fakeClusters{}, ObjectCacheConfig{})
	ref := podRef("c1", "default", "web")
	ref.Version = ""
	_, err = c.Get(context.Background(), ref)
	require.ErrorIs(t, err, ErrIncompleteRef)
}

func TestObjectCacheClusterScoped(t *testing.T) {
	dyn := newFakeDynamic()
	nodes := podsGVR.GroupVersion().WithResource("nodes")
	dyn.add(nodes, map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"}})
	c, _, _ := newTestCache(t, fakeClusters{"c1": dyn}, ObjectCacheConfig{})
	ref := podRef("c1", "", "n1")
	ref.Resource = "nodes"
	body, err := c.Get(context.Background(), ref)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"Node"`)
}
