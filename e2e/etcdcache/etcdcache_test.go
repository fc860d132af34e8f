// Package etcdcache_test tests the informer diff cache's etcd backend (etcdstore.Store) against a
// real etcd server embedded in the test process: records written by the leading replica reach a
// follower's audit consumer, keys expire with their lease, and an etcd outage degrades to "diff
// unavailable" without hanging.
//
// It is a module of its own (it needs go.etcd.io/etcd/server/v3, which neither the main module
// nor its users should carry, and requiring the main module from e2e/ would change the pinned
// versions the control plane there is built with). No control plane is needed:
//
//	cd e2e/etcdcache && go test -count=1 -v .
package etcdcache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/aggregator"
	auditconsumer "github.com/kelemetry/kelemetry/audit/consumer"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	etcdcfg "github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/etcdstore"
	informerimpl "github.com/kelemetry/kelemetry/internal/informer"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/telemetry"
)

// freePort returns a localhost port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// etcdServer is an embedded single-member etcd.
type etcdServer struct {
	e        *embed.Etcd
	endpoint string
	once     sync.Once
}

// startEtcd starts an embedded etcd in a temporary folder on free localhost ports; it is stopped
// when the test ends.
func startEtcd(t testing.TB) *etcdServer {
	t.Helper()
	return startEtcdWith(t, "http", func(*embed.Config) {})
}

func (s *etcdServer) stop() { s.once.Do(s.e.Close) }

func client(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// replica is one process's etcd cache, with its own metrics.
type replica struct {
	cache  *etcdstore.Store
	reader *sdkmetric.ManualReader
}

func newReplica(t testing.TB, cfg etcdcfg.Config) *replica {
	t.Helper()
	local, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	r := &replica{reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.cache, err = etcdstore.New(cfg, local, telemetry.Settings{MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, r.cache.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, r.cache.Stop(ctx))
	})
	return r
}

// counter sums the int64 counter name's points whose attributes include key=value.
func (r *replica) counter(t testing.TB, name, key, value string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is not an int64 sum", name)
			for _, p := range sum.DataPoints {
				if v, ok := p.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
					n += p.Value
				}
			}
		}
	}
	return n
}

func (r *replica) waitReady(t testing.TB) {
	t.Helper()
	select {
	case <-r.cache.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the etcd cache did not load the prefix within 10s")
	}
}

func etcdConfig(endpoint, prefix string) etcdcfg.Config {
	return etcdcfg.Config{Endpoints: []string{endpoint}, Prefix: prefix, TTL: time.Minute,
		DialTimeout: 2 * time.Second, RequestTimeout: 2 * time.Second}
}

func depKey(name, rv string) changes.RecordKey {
	return changes.RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func replicasChange(name, base, rv string) changes.Record {
	return changes.Record{Key: depKey(name, rv), Kind: changes.KindChange, BaseRV: base, Time: time.Now(),
		Changes: []objdiff.Change{{Path: "spec.replicas", Op: objdiff.OpReplace, Old: json.RawMessage("1"), New: json.RawMessage("3")}}}
}

func deployObject(name string) aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name}
}

func newConsumer(t testing.TB, records changes.Store, wait time.Duration) (*auditconsumer.Consumer, *aggregatortest.RecordingAggregator) {
	t.Helper()
	agg := &aggregatortest.RecordingAggregator{}
	c, err := auditconsumer.New(auditconsumer.Config{InformerJoin: auditconsumer.InformerJoinConfig{Wait: wait, Interval: 10 * time.Millisecond}},
		auditconsumer.Deps{Aggregator: agg, InformerDiffs: records})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, c.Stop(context.Background())) })
	return c, agg
}

// logMessages returns the messages of ev's diff and snapshot logs.
func logMessages(ev *aggregator.Event) []string {
	var out []string
	for _, l := range ev.Logs {
		if l.Type == aggregator.LogTypeDiff || l.Type == aggregator.LogTypeSnapshot {
			out = append(out, l.Message)
		}
	}
	return out
}

func waitEvents(t testing.TB, agg *aggregatortest.RecordingAggregator, n int, within time.Duration) []*aggregator.Event {
	t.Helper()
	require.Eventually(t, func() bool { return len(agg.Events()) >= n }, within, 5*time.Millisecond, "want %d events", n)
	return agg.Events()
}

// fakeSource is the part of dynamic.Interface a informerimpl.Informer uses: List (of nothing) and Watch
// of Deployments; the test drives the watches.
type fakeSource struct {
	dynamic.Interface
	watches chan *watch.FakeWatcher
}

func (f *fakeSource) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{f: f}
}

type fakeResource struct {
	dynamic.NamespaceableResourceInterface
	f *fakeSource
}

func (r *fakeResource) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{Object: map[string]any{}}
	l.SetResourceVersion("1")
	return l, nil
}

func (r *fakeResource) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(16, false)
	r.f.watches <- w
	return w, nil
}

type deploymentsOnly struct{}

func (deploymentsOnly) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return []*metav1.APIGroup{{Name: "apps", PreferredVersion: metav1.GroupVersionForDiscovery{Version: "v1"}}},
		[]*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Verbs: metav1.Verbs{"list", "watch"}}}}}, nil
}

func deployment(name, uid, rv string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": uid, "resourceVersion": rv,
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": map[string]any{"replicas": replicas},
	}}
}

// Two replicas: both watch the same cluster, only the leader records (through etcd); the
// follower's audit consumer joins the leader's records onto Metadata-level audit events: a
// create's creation snapshot, an update's diff, a patch's diff (joined by time) and a delete's
// snapshot. A replica started later loads what is already there. Every key has a lease.
func TestEtcdCacheLeaderToFollower(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/t1/")
	leader, follower := newReplica(t, cfg), newReplica(t, cfg)
	leader.waitReady(t)
	follower.waitReady(t)

	// Each replica runs an informer on the same source; only the leader's records.
	var leaderSrc, followerSrc = &fakeSource{watches: make(chan *watch.FakeWatcher, 4)}, &fakeSource{watches: make(chan *watch.FakeWatcher, 4)}
	informerCfg := informerimpl.Config{Resources: []string{"apps/deployments"}}
	var watches []*watch.FakeWatcher
	for _, r := range []struct {
		src     *fakeSource
		cache   changes.Store
		leading bool
	}{{leaderSrc, leader.cache, true}, {followerSrc, follower.cache, false}} {
		in, err := informerimpl.New("c1", r.src, deploymentsOnly{}, r.cache, informerCfg, telemetry.Settings{})
		require.NoError(t, err)
		in.SetLeading(func() bool { return r.leading })
		require.NoError(t, in.Start(context.Background()))
		t.Cleanup(func() { assert.NoError(t, in.Stop(context.Background())) })
		select {
		case w := <-r.src.watches:
			watches = append(watches, w)
		case <-time.After(10 * time.Second):
			t.Fatal("the informer did not watch")
		}
	}
	consumer, agg := newConsumer(t, follower.cache, 10*time.Second)

	// The API server's writes, as audited at Metadata level and as watched by both informers.
	now := time.Now()
	consumer.Handle(t.Context(), "c1", auditfixture.MetadataEvent("create", "create", "web", "", now))
	consumer.Handle(t.Context(), "c1", auditfixture.MetadataEvent("update", "update", "web", "10", now.Add(time.Millisecond)))
	consumer.Handle(t.Context(), "c1", auditfixture.MetadataEvent("patch", "patch", "web", "", now.Add(2*time.Millisecond)))
	consumer.Handle(t.Context(), "c1", auditfixture.MetadataEvent("delete", "delete", "web", "", now.Add(3*time.Millisecond)))
	require.Empty(t, agg.Events(), "nothing recorded yet: all four wait")
	for _, w := range watches {
		w.Add(deployment("web", "uid-1", "10", 1))
		w.Modify(deployment("web", "uid-1", "11", 3))
		w.Modify(deployment("web", "uid-1", "12", 5))
		w.Delete(deployment("web", "uid-1", "13", 5))
	}
	evs := waitEvents(t, agg, 4, 10*time.Second)
	got := map[string][]string{}
	for _, ev := range evs {
		got[strings.TrimSuffix(ev.ID, "/ResponseComplete")] = logMessages(ev)
	}
	require.Len(t, got["create"], 1)
	assert.Contains(t, got["create"][0], `"uid":"uid-1"`)
	assert.Equal(t, []string{"spec.replicas 1 -> 3"}, got["update"])
	assert.Equal(t, []string{"spec.replicas 3 -> 5"}, got["patch"])
	require.NotEmpty(t, got["delete"])
	assert.Contains(t, got["delete"][0], `"replicas":5`)
	assert.Zero(t, follower.counter(t, "kelemetry.diff.etcd.records", "result", "written"), "the follower writes nothing")
	require.Eventually(t, func() bool { return leader.counter(t, "kelemetry.diff.etcd.records", "result", "written") == 4 }, 5*time.Second, 10*time.Millisecond)
	// Counted just after the record reaches the follower's cache: poll.
	require.Eventually(t, func() bool {
		return follower.counter(t, "kelemetry.diff.etcd.records", "result", "mirrored") >= 4
	}, 5*time.Second, 10*time.Millisecond, "the follower mirrors the leader's records")

	// In etcd: four keys under the prefix, each with a lease of about the TTL.
	cli := client(t, srv.endpoint)
	resp, err := cli.Get(t.Context(), "/t1/", clientv3.WithPrefix())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
		require.NotZero(t, kv.Lease, "key %s has no lease", kv.Key)
		ttl, err := cli.TimeToLive(t.Context(), clientv3.LeaseID(kv.Lease))
		require.NoError(t, err)
		assert.InDelta(t, time.Minute.Seconds(), float64(ttl.TTL), 10, "lease TTL of %s", kv.Key)
	}
	assert.ElementsMatch(t, []string{"/t1/c1/apps/deployments/default/web/10", "/t1/c1/apps/deployments/default/web/11",
		"/t1/c1/apps/deployments/default/web/12", "/t1/c1/apps/deployments/default/web/13"}, keys)

	// A replica started now loads the records.
	late := newReplica(t, cfg)
	late.waitReady(t)
	rec, ok := late.cache.Find(changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "10"})
	require.True(t, ok)
	assert.Equal(t, "11", rec.Key.ResourceVersion)
	assert.Equal(t, "spec.replicas", rec.Changes[0].Path)
}

// Values are bounded: a record larger than maxValueBytes after compression is not written, and
// counted.
func TestEtcdCacheValueBound(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/t2/")
	cfg.MaxValueBytes = 1024
	leader, follower := newReplica(t, cfg), newReplica(t, cfg)
	follower.waitReady(t)
	// Incompressible enough: distinct numbers.
	var b strings.Builder
	b.WriteString(`{"data":[`)
	for i := range 2000 {
		fmt.Fprintf(&b, "%d,", i*7919%100003)
	}
	b.WriteString(`0]}`)
	leader.cache.Put(changes.Record{Key: depKey("big", "5"), Kind: changes.KindCreation, Snapshot: []byte(b.String()), Time: time.Now()})
	leader.cache.Put(replicasChange("small", "5", "6"))
	require.Eventually(t, func() bool {
		_, ok := follower.cache.Find(changes.Query{Object: deployObject("small"), Verb: "update", RequestRV: "5"})
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(1), leader.counter(t, "kelemetry.diff.etcd.records", "result", "too_large"))
	_, ok := follower.cache.Find(changes.Query{Object: deployObject("big"), Verb: "create", Since: time.Now().Add(-time.Minute)})
	assert.False(t, ok, "the large record never reached the follower")
	_, ok = leader.cache.Find(changes.Query{Object: deployObject("big"), Verb: "create", Since: time.Now().Add(-time.Minute)})
	assert.True(t, ok, "the leader keeps it locally")
}

// Keys expire with their lease, and the follower forgets the records etcd removed.
func TestEtcdCacheTTL(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/t3/")
	cfg.TTL = 2 * time.Second
	leader, follower := newReplica(t, cfg), newReplica(t, cfg)
	follower.waitReady(t)
	q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "5"}
	leader.cache.Put(replicasChange("web", "5", "6"))
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q); return ok }, 10*time.Second, 10*time.Millisecond)
	seen := time.Now()
	cli := client(t, srv.endpoint)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/t3/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 0
	}, 15*time.Second, 50*time.Millisecond, "the key expires")
	expired := time.Since(seen)
	assert.GreaterOrEqual(t, expired, time.Second, "not before the TTL (%s)", expired)
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q); return !ok }, 5*time.Second, 10*time.Millisecond,
		"the follower drops the expired record")
	require.Eventually(t, func() bool { // counted just after the record leaves the cache
		return follower.counter(t, "kelemetry.diff.etcd.records", "result", "removed") >= 1
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(1), follower.counter(t, "kelemetry.diff.etcd.records", "result", "removed"))
	t.Logf("key expired %s after the follower saw it (TTL %s)", expired.Round(time.Millisecond), cfg.TTL)
}

// etcd goes down: the leader's writes fail and are counted, the follower's consumer sends its
// events with "diff unavailable" after the join wait (no hang), the leader's own consumer still
// joins from its local records, and everything stops in time.
func TestEtcdCacheEtcdDown(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/t4/")
	cfg.RequestTimeout = 300 * time.Millisecond
	leader, follower := newReplica(t, cfg), newReplica(t, cfg)
	follower.waitReady(t)
	leader.waitReady(t)
	srv.stop()

	followerConsumer, followerAgg := newConsumer(t, follower.cache, time.Second)
	leaderConsumer, leaderAgg := newConsumer(t, leader.cache, time.Second)
	start := time.Now()
	leader.cache.Put(replicasChange("web", "5", "6"))
	ev := auditfixture.MetadataEvent("u1", "update", "web", "5", time.Now())
	followerConsumer.Handle(t.Context(), "c1", ev)
	other := auditfixture.MetadataEvent("u2", "update", "other", "1", time.Now())
	followerConsumer.Handle(t.Context(), "c1", other)
	leaderConsumer.Handle(t.Context(), "c1", ev)

	evs := waitEvents(t, followerAgg, 2, 5*time.Second)
	took := time.Since(start)
	for _, e := range evs {
		msgs := logMessages(e)
		require.Len(t, msgs, 1)
		assert.True(t, strings.HasPrefix(msgs[0], "diff unavailable"), msgs[0])
	}
	assert.Less(t, took, 3*time.Second, "sent after the 1s join wait, not later")
	require.Len(t, leaderAgg.Events(), 1)
	assert.Equal(t, []string{"spec.replicas 1 -> 3"}, logMessages(leaderAgg.Events()[0]), "the leader joins its own records")

	require.Eventually(t, func() bool {
		return leader.counter(t, "kelemetry.diff.etcd.records", "result", "write_error") == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.Positive(t, leader.counter(t, "kelemetry.diff.etcd.errors", "op", "put")+leader.counter(t, "kelemetry.diff.etcd.errors", "op", "lease"))
	require.Eventually(t, func() bool {
		return follower.counter(t, "kelemetry.diff.etcd.errors", "op", "watch")+follower.counter(t, "kelemetry.diff.etcd.errors", "op", "load") > 0
	}, 15*time.Second, 50*time.Millisecond, "the follower counts its failing watch or reloads")

	stopStart := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, follower.cache.Stop(ctx))
	require.NoError(t, leader.cache.Stop(ctx))
	assert.Less(t, time.Since(stopStart), 3*time.Second)
}

// BenchmarkEtcdCacheRoundTrip measures how long a record takes from the leader's Put to the
// follower's Find (one at a time), through a local embedded etcd.
func BenchmarkEtcdCacheRoundTrip(b *testing.B) {
	srv := startEtcd(b)
	cfg := etcdConfig(srv.endpoint, "/bench/")
	leader, follower := newReplica(b, cfg), newReplica(b, cfg)
	follower.waitReady(b)
	b.ResetTimer()
	for i := range b.N {
		rv := fmt.Sprint(i + 2)
		leader.cache.Put(replicasChange("web", fmt.Sprint(i+1), rv))
		q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: fmt.Sprint(i + 1)}
		for {
			if _, ok := follower.cache.Find(q); ok {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// BenchmarkEtcdCacheThroughput measures records per second from the leader's Put to the
// follower's mirror, 1,000 records at a time.
func BenchmarkEtcdCacheThroughput(b *testing.B) {
	srv := startEtcd(b)
	cfg := etcdConfig(srv.endpoint, "/bench/")
	leader, follower := newReplica(b, cfg), newReplica(b, cfg)
	follower.waitReady(b)
	const batch = 1000
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for j := range batch {
			n := i*batch + j
			leader.cache.Put(replicasChange(fmt.Sprintf("web-%d", n%500), fmt.Sprint(n+1), fmt.Sprint(n+2)))
		}
		last := i*batch + batch - 1
		q := changes.Query{Object: deployObject(fmt.Sprintf("web-%d", last%500)), Verb: "update", RequestRV: fmt.Sprint(last + 1)}
		for {
			if _, ok := follower.cache.Find(q); ok {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "records/s")
}
