package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/diff"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/informer/informertest"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

func newTestInformer(t *testing.T, dyn dynamic.Interface, cfg Config) (*Informer, *changes.Cache) {
	t.Helper()
	cache, err := changes.NewCache(cfg.Cache, telemetry.Settings{})
	require.NoError(t, err)
	in, err := New("c1", dyn, informertest.Discovery{}, cache, cfg, telemetry.Settings{})
	require.NoError(t, err)
	in.retry = backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}
	return in, cache
}

func TestInformerResolve(t *testing.T) {
	in, _ := newTestInformer(t, informertest.NewDynamic(), Config{})
	gvrs, err := in.resolve()
	require.NoError(t, err)
	var got []string
	for _, g := range gvrs {
		got = append(got, g.String())
	}
	// No subresources, no create-only resources, no events or leases, preferred versions only.
	assert.Equal(t, []string{"/v1, Resource=pods", "/v1, Resource=secrets", "apps/v1, Resource=deployments"}, got)

	in, _ = newTestInformer(t, informertest.NewDynamic(), Config{Resources: []string{"apps/deployments", "example.com/widgets"}})
	gvrs, err = in.resolve()
	require.NoError(t, err)
	assert.Equal(t, []schema.GroupVersionResource{{Group: "apps", Version: "v1", Resource: "deployments"}}, gvrs)

	_, err = New("c1", informertest.NewDynamic(), nil, &changes.Cache{}, Config{Resources: []string{"a/b/c"}}, telemetry.Settings{})
	require.Error(t, err)
}

func TestInformerWatch(t *testing.T) {
	dyn := informertest.NewDynamic()
	dyn.Set(informertest.PodsGVR, "10", informertest.Pod("a", "5", "nginx:1"))
	in, cache := newTestInformer(t, dyn, Config{Resources: []string{"pods"}})
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	t.Cleanup(func() { require.NoError(t, in.Stop(ctx)) })
	w := <-dyn.Watches

	// The initial list records nothing.
	assert.Equal(t, 0, cache.Len())
	assert.EqualValues(t, 1, in.Objects())

	// An update: the change against the kept version, without managedFields.
	w.Modify(&unstructured.Unstructured{Object: informertest.Pod("a", "11", "nginx:2")})
	rec := informertest.WaitRecord(t, cache, informertest.PodKey("a", "11"))
	assert.Equal(t, changes.KindChange, rec.Kind)
	assert.Equal(t, "5", rec.BaseRV)
	require.Len(t, rec.Changes, 1)
	assert.Equal(t, "spec.containers[name=app].image nginx:1 -> nginx:2", rec.Changes[0].String())
	found, ok := cache.Find(changes.Query{Object: rec.Key.ObjectKey(), Verb: "update", RequestRV: "5"})
	require.True(t, ok, "found by base resourceVersion")
	assert.Equal(t, rec.Key, found.Key)

	// A creation: a snapshot without managedFields.
	w.Add(&unstructured.Unstructured{Object: informertest.Pod("b", "12", "redis")})
	rec = informertest.WaitRecord(t, cache, informertest.PodKey("b", "12"))
	assert.Equal(t, changes.KindCreation, rec.Kind)
	assert.Contains(t, string(rec.Snapshot), `"redis"`)
	assert.NotContains(t, string(rec.Snapshot), "managedFields")

	// Deletion starts: a deletion snapshot at that version, with the change.
	start := time.Now()
	deleting := informertest.Pod("b", "13", "redis")
	deleting["metadata"].(map[string]any)["deletionTimestamp"] = "2026-11-29T17:00:00Z"
	w.Modify(&unstructured.Unstructured{Object: deleting})
	rec = informertest.WaitRecord(t, cache, informertest.PodKey("b", "13"))
	assert.Equal(t, changes.KindDeletion, rec.Kind)
	assert.False(t, rec.Final)
	assert.Contains(t, string(rec.Snapshot), "deletionTimestamp")
	require.Len(t, rec.Changes, 1)
	assert.Equal(t, "metadata.deletionTimestamp", rec.Changes[0].Path)

	// The object disappears: a final deletion record; the delete request finds the start.
	deleted := informertest.Pod("b", "15", "redis")
	deleted["metadata"].(map[string]any)["deletionTimestamp"] = "2026-11-29T17:00:00Z"
	w.Delete(&unstructured.Unstructured{Object: deleted})
	w.Delete(&unstructured.Unstructured{Object: informertest.Pod("gone", "14", "x")})
	informertest.WaitRecord(t, cache, informertest.PodKey("gone", "14"))
	final, ok := cache.Get(informertest.PodKey("b", "15"))
	require.True(t, ok)
	assert.True(t, final.Final)
	assert.Equal(t, changes.KindDeletion, final.Kind)
	found, ok = cache.Find(changes.Query{Object: final.Key.ObjectKey(), Verb: "delete", Since: start.Add(-time.Second)})
	require.True(t, ok)
	assert.Equal(t, "13", found.Key.ResourceVersion)
	assert.False(t, found.Final)
	_, ok = cache.Find(changes.Query{Object: final.Key.ObjectKey(), Verb: "delete", Since: time.Now().Add(time.Hour)})
	assert.False(t, ok, "a deletion older than the request belongs to an earlier object")
	require.Eventually(t, func() bool { return in.Objects() == 1 }, 5*time.Second, time.Millisecond)

	// 410 Gone: relist; what changed meanwhile is recorded.
	dyn.Set(informertest.PodsGVR, "30", informertest.Pod("c", "21", "busybox"))
	w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	<-dyn.Watches
	rec = informertest.WaitRecord(t, cache, informertest.PodKey("c", "21"))
	assert.Equal(t, changes.KindCreation, rec.Kind)
	rec = informertest.WaitRecord(t, cache, informertest.PodKey("a", "11"))
	assert.Equal(t, changes.KindChange, rec.Kind, "the last change stays for the update that made it")
	gone, ok := cache.Find(changes.Query{Object: rec.Key.ObjectKey(), Verb: "delete"})
	require.True(t, ok, "a vanished object gets a deletion record")
	assert.True(t, gone.Final)
	assert.Equal(t, "30", gone.Key.ResourceVersion, "keyed by the list that no longer has it")
	assert.Equal(t, "11", gone.BaseRV)
}

func TestInformerRetriesFailedList(t *testing.T) {
	dyn := informertest.NewDynamic()
	dyn.SetListErr(errors.New("boom"))
	dyn.Set(informertest.PodsGVR, "1")
	in, _ := newTestInformer(t, dyn, Config{Resources: []string{"pods"}})
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	require.Eventually(t, func() bool {
		return dyn.Failed() > 0
	}, 5*time.Second, time.Millisecond, "the list fails")
	dyn.SetListErr(nil)
	select {
	case <-dyn.Watches:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch after the list recovered")
	}
	require.NoError(t, in.Stop(ctx))
	require.NoError(t, in.Stop(ctx), "stop twice")
}

func TestInformerRedactsSecrets(t *testing.T) {
	dyn := informertest.NewDynamic()
	secret := func(rv, value string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "s", "namespace": "default", "resourceVersion": rv},
			"data":     map[string]any{"password": value}}
	}
	dyn.Set(secretsGVR, "1", secret("1", "aHVudGVyMg=="))
	in, cache := newTestInformer(t, dyn, Config{Resources: []string{"secrets"}})
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	t.Cleanup(func() { require.NoError(t, in.Stop(ctx)) })
	w := <-dyn.Watches
	w.Modify(&unstructured.Unstructured{Object: secret("2", "c2VjcmV0")})
	rec := informertest.WaitRecord(t, cache, changes.RecordKey{Cluster: "c1", Resource: "secrets", Namespace: "default", Name: "s", ResourceVersion: "2"})
	require.Len(t, rec.Changes, 1)
	assert.True(t, rec.Changes[0].Redacted)
	w.Delete(&unstructured.Unstructured{Object: secret("3", "c2VjcmV0")})
	rec = informertest.WaitRecord(t, cache, changes.RecordKey{Cluster: "c1", Resource: "secrets", Namespace: "default", Name: "s", ResourceVersion: "3"})
	for _, clear := range []string{"aHVudGVyMg==", "c2VjcmV0"} {
		assert.NotContains(t, fmt.Sprint(rec), clear)
	}
	for _, l := range rec.Logs(time.Now(), objdiff.LogFormat{}) {
		assert.NotContains(t, l.Message, "c2VjcmV0")
	}
}

func TestInformerStoreBounds(t *testing.T) {
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	in, err := New("c1", informertest.NewDynamic(), informertest.Discovery{}, cache, Config{MaxObjects: 2, MaxObjectBytes: 400}, telemetry.Settings{})
	require.NoError(t, err)
	w := &resourceWatcher{in: in, gvr: informertest.PodsGVR, res: diff.Resource{Resource: "pods"}, objects: map[string]*kept{}, synced: true}
	ctx := context.Background()
	for i := range 3 {
		w.apply(ctx, watch.Added, &unstructured.Unstructured{Object: informertest.Pod(fmt.Sprint("p", i), fmt.Sprint(i+1), "img")}, false)
	}
	assert.EqualValues(t, 2, in.Objects(), "count bound")
	big := informertest.Pod("p0", "10", strings.Repeat("x", 500))
	w.apply(ctx, watch.Modified, &unstructured.Unstructured{Object: big}, false)
	assert.EqualValues(t, 1, in.Objects(), "too large: dropped")
	_, ok := cache.Get(informertest.PodKey("p0", "10"))
	assert.True(t, ok, "the change is still recorded")
	w.apply(ctx, watch.Modified, &unstructured.Unstructured{Object: informertest.Pod("p0", "12", "img2")}, false)
	_, ok = cache.Get(informertest.PodKey("p0", "12"))
	assert.False(t, ok, "no base version: nothing recorded")
	assert.EqualValues(t, 2, in.Objects(), "kept again once it fits")
	w.apply(ctx, watch.Deleted, &unstructured.Unstructured{Object: informertest.Pod("p1", "11", "img")}, false)
	w.apply(ctx, watch.Deleted, &unstructured.Unstructured{Object: informertest.Pod("p0", "13", "img")}, false)
	assert.EqualValues(t, 0, in.Objects())
	assert.EqualValues(t, 0, in.Bytes())
}

// TestInformerMemoryPer10kPods measures what keeping 10,000 Pods costs: the store's own byte
// accounting and the Go heap growth.
func TestInformerMemoryPer10kPods(t *testing.T) {
	raw, err := os.ReadFile("../../linker/testdata/pod.json")
	require.NoError(t, err)
	var tmpl map[string]any
	require.NoError(t, json.Unmarshal(raw, &tmpl))
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	in, err := New("c1", informertest.NewDynamic(), informertest.Discovery{}, cache, Config{}, telemetry.Settings{})
	require.NoError(t, err)
	w := &resourceWatcher{in: in, gvr: informertest.PodsGVR, res: diff.Resource{Resource: "pods"}, objects: map[string]*kept{}}
	ctx := context.Background()
	const n = 10_000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		u := &unstructured.Unstructured{Object: tmpl}
		u = u.DeepCopy()
		u.SetName(fmt.Sprintf("demo-%06d", i))
		u.SetUID(types.UID(fmt.Sprintf("uid-%06d", i)))
		w.apply(ctx, watch.Modified, u, true)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.EqualValues(t, n, in.Objects())
	assert.Less(t, in.Bytes()/n, int64(len(raw)), "kept copies are stripped of managedFields")
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("10,000 pods (%d bytes each with managedFields): store accounting %d bytes, heap growth %d bytes (%d per pod)",
		len(raw), in.Bytes(), heap, heap/n)
	runtime.KeepAlive(w)
}

// BenchmarkInformerPodUpdate measures one watch event of a running Pod (an image change): the
// JSON encoding of the decoded object, the snapshot, the diff and the change cache write.
func BenchmarkInformerPodUpdate(b *testing.B) {
	raw, err := os.ReadFile("../../linker/testdata/pod.json")
	require.NoError(b, err)
	var objs [2]*unstructured.Unstructured
	for i, img := range []string{"nginx:1", "nginx:2"} {
		var m map[string]any
		require.NoError(b, json.Unmarshal(raw, &m))
		objs[i] = &unstructured.Unstructured{Object: m}
		containers, _, _ := unstructured.NestedSlice(m, "spec", "containers")
		containers[0].(map[string]any)["image"] = img
		require.NoError(b, unstructured.SetNestedSlice(m, containers, "spec", "containers"))
	}
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(b, err)
	in, err := New("c1", informertest.NewDynamic(), informertest.Discovery{}, cache, Config{}, telemetry.Settings{})
	require.NoError(b, err)
	w := &resourceWatcher{in: in, gvr: informertest.PodsGVR, res: diff.Resource{Resource: "pods"}, objects: map[string]*kept{}, synced: true}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u := objs[i%2]
		u.SetResourceVersion(fmt.Sprint(i + 1))
		w.apply(ctx, watch.Modified, u, false)
	}
}

type flakyDiscovery struct{ calls atomic.Int32 }

func (f *flakyDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	if f.calls.Add(1) < 3 {
		return nil, nil, errors.New("connection refused")
	}
	return informertest.Discovery{}.ServerGroupsAndResources()
}

func TestInformerRetriesDiscovery(t *testing.T) {
	dyn := informertest.NewDynamic()
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	disc := &flakyDiscovery{}
	in, err := New("c1", dyn, disc, cache, Config{Resources: []string{"pods"}}, telemetry.Settings{})
	require.NoError(t, err)
	in.retry = backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	require.Error(t, in.Start(ctx), "start twice")
	select {
	case <-dyn.Watches:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch after discovery recovered")
	}
	assert.EqualValues(t, 3, disc.calls.Load())
	require.NoError(t, in.Stop(ctx))
}

// Only the leading Informer records; a follower keeps the last versions and records from the
// first change after it starts leading.
func TestInformerRecordsOnlyWhileLeading(t *testing.T) {
	dyn := informertest.NewDynamic()
	dyn.Set(informertest.PodsGVR, "10", informertest.Pod("a", "5", "nginx:1"))
	in, cache := newTestInformer(t, dyn, Config{Resources: []string{"pods"}})
	var mu sync.Mutex
	leading := false
	in.SetLeading(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return leading
	})
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	t.Cleanup(func() { require.NoError(t, in.Stop(ctx)) })
	w := <-dyn.Watches

	w.Modify(&unstructured.Unstructured{Object: informertest.Pod("a", "11", "nginx:2")})
	w.Add(&unstructured.Unstructured{Object: informertest.Pod("b", "12", "redis")})
	require.Eventually(t, func() bool { return in.Objects() == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, cache.Len(), "a follower records nothing")

	mu.Lock()
	leading = true
	mu.Unlock()
	w.Modify(&unstructured.Unstructured{Object: informertest.Pod("a", "13", "nginx:3")})
	rec := informertest.WaitRecord(t, cache, informertest.PodKey("a", "13"))
	assert.Equal(t, changes.KindChange, rec.Kind)
	assert.Equal(t, "11", rec.BaseRV, "the follower kept the version it saw")
	require.Len(t, rec.Changes, 1)
	assert.Equal(t, "spec.containers[name=app].image nginx:2 -> nginx:3", rec.Changes[0].String())
	_, ok := cache.Get(informertest.PodKey("a", "11"))
	assert.False(t, ok)
}

// The informer's counters are exported at 0 from the start, each result and reason included.
func TestInformerCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	cache, err := changes.NewCache(changescfg.CacheConfig{}, ts)
	require.NoError(t, err)
	_, err = New("c1", informertest.NewDynamic(), informertest.Discovery{}, cache, Config{}, ts)
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros("result", "change", "creation", "deletion", "skipped", "error", "not_leader"),
		telemetrytest.Points(t, reader, "kelemetry.diff.informer.events"))
	assert.Equal(t, telemetrytest.Zeros("reason", "object_too_large", "store_full"), telemetrytest.Points(t, reader, "kelemetry.diff.informer.drops"))
}
