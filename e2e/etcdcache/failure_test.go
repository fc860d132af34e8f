package etcdcache_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	etcdcfg "github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/etcdstore"
	"github.com/kelemetry/kelemetry/telemetry"
)

// newStoppedReplica is newReplica without Start: records Put before Start are written in one
// batch once it starts.
func newStoppedReplica(t testing.TB, cfg etcdcfg.Config) *replica {
	t.Helper()
	local, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	r := &replica{reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.cache, err = etcdstore.New(cfg, local, telemetry.Settings{MeterProvider: mp})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, r.cache.Stop(ctx))
	})
	return r
}

// The informer records two records under one key when a relist finds an object gone
// (vanished: a final deletion at the last kept resourceVersion, the key of the last change).
// etcd rejects a transaction that puts one key twice, so both must not go into one batch: the
// last one wins, as in the local cache, and the other records of the batch are written.
func TestEtcdCacheSameKeyInOneBatch(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/dup/")
	leader := newStoppedReplica(t, cfg)
	leader.cache.Put(replicasChange("web", "5", "6"))
	leader.cache.Put(changes.Record{Key: depKey("web", "6"), Kind: changes.KindDeletion, UID: "u1", Final: true,
		Snapshot: []byte(`{"metadata":{"name":"web"}}`), Time: time.Now()})
	leader.cache.Put(replicasChange("other", "1", "2"))
	require.NoError(t, leader.cache.Start(context.Background()))

	cli := client(t, srv.endpoint)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/dup/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	}, 10*time.Second, 20*time.Millisecond, "both keys written")
	require.Eventually(t, func() bool {
		return leader.counter(t, "kelemetry.diff.etcd.records", "result", "written") == 2
	}, 5*time.Second, 10*time.Millisecond, "counted once the transaction returns")
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.records", "result", "write_error"))
	assert.Equal(t, int64(1), leader.counter(t, "kelemetry.diff.etcd.records", "result", "replaced"))

	follower := newReplica(t, cfg)
	follower.waitReady(t)
	rec, ok := follower.cache.Find(changes.Query{Object: deployObject("web"), Verb: "delete", Since: time.Now().Add(-time.Minute)})
	require.True(t, ok, "the later record of the key is the one stored")
	assert.True(t, rec.Final)
}

// Every key lives at least TTL after its write (the documented bound), also when written late
// in the period its lease is shared.
func TestEtcdCacheKeyLivesTTL(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/ttl/")
	cfg.TTL = 10 * time.Second // leases shared for 1s
	leader := newReplica(t, cfg)
	leader.cache.Put(replicasChange("a", "1", "2"))
	cli := client(t, srv.endpoint)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/ttl/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	}, 10*time.Second, 10*time.Millisecond)
	// Still within the lease's period, not at its start. Without the lease's extra period the
	// remaining TTL below would already be under 10 s; the rest of the period (about 0.7 s) is
	// the slack for the reads below on a loaded machine (etcd reports whole seconds).
	time.Sleep(300 * time.Millisecond)
	leader.cache.Put(replicasChange("b", "1", "2"))
	key := "/ttl/c1/apps/deployments/default/b/2"
	lease := waitLease(t, cli, key)
	ttl, err := cli.TimeToLive(t.Context(), clientv3.LeaseID(lease))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ttl.TTL, int64(cfg.TTL/time.Second), "remaining lease of a key just written (granted %ds)", ttl.GrantedTTL)
}

// Stop writes what is queued before it returns (within its context).
func TestEtcdCacheStopFlushes(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/flush/")
	leader := newStoppedReplica(t, cfg)
	require.NoError(t, leader.cache.Start(context.Background()))
	leader.waitReady(t)
	for i := range 5000 {
		leader.cache.Put(replicasChange("web", "1", strconv.Itoa(i+2)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, leader.cache.Stop(ctx))
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.records", "result", "stopped"))
	assert.Equal(t, int64(5000), leader.counter(t, "kelemetry.diff.etcd.records", "result", "written"))
}

// A lease that disappears within its sharing period (revoked, etcd restored) is granted anew:
// the next write does not fail.
func TestEtcdCacheLeaseRevoked(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/revoked/")
	cfg.TTL = time.Minute // leases shared for 6s
	leader := newReplica(t, cfg)
	leader.cache.Put(replicasChange("a", "1", "2"))
	cli := client(t, srv.endpoint)
	lease := waitLease(t, cli, "/revoked/", clientv3.WithPrefix())
	_, err := cli.Revoke(t.Context(), clientv3.LeaseID(lease))
	require.NoError(t, err)
	leader.cache.Put(replicasChange("b", "1", "2"))
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/revoked/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	}, 10*time.Second, 10*time.Millisecond, "b written on a new lease")
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.records", "result", "write_error"))
}

// A write that fails because its lease cannot be granted counts one lease error, not a put
// error too (no put was tried).
func TestEtcdCacheErrorsCountedOnce(t *testing.T) {
	srv := startEtcd(t)
	cfg := etcdConfig(srv.endpoint, "/errs/")
	cfg.RequestTimeout = 300 * time.Millisecond
	leader := newReplica(t, cfg)
	leader.waitReady(t)
	srv.stop()
	leader.cache.Put(replicasChange("web", "5", "6"))
	require.Eventually(t, func() bool {
		return leader.counter(t, "kelemetry.diff.etcd.records", "result", "write_error") == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(1), leader.counter(t, "kelemetry.diff.etcd.errors", "op", "lease"))
	assert.Zero(t, leader.counter(t, "kelemetry.diff.etcd.errors", "op", "put"))
}

// silentEtcd is a listener that accepts connections and never answers.
func silentEtcd(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// Stop's context ends before the flush deadline (it is canceled, it has no deadline): the
// writes end with it, and every queued record is accounted for at once, not RequestTimeout
// later by a writer that outlived Stop.
func TestEtcdCacheStopCanceled(t *testing.T) {
	cfg := etcdConfig(silentEtcd(t), "/canceled/")
	cfg.DialTimeout, cfg.RequestTimeout = 300*time.Millisecond, 3*time.Second
	r := newStoppedReplica(t, cfg)
	require.NoError(t, r.cache.Start(context.Background()))
	time.Sleep(200 * time.Millisecond)
	for i := range 100 {
		r.cache.Put(replicasChange("web", "1", strconv.Itoa(i+2)))
	}
	time.Sleep(100 * time.Millisecond) // the first batch is in flight
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_ = r.cache.Stop(ctx) // nil or canceled, depending on which ends first
	assert.Less(t, time.Since(start), time.Second)
	require.Eventually(t, func() bool {
		return r.counter(t, "kelemetry.diff.etcd.records", "result", "write_error")+
			r.counter(t, "kelemetry.diff.etcd.records", "result", "stopped") == 100
	}, time.Second, 10*time.Millisecond, "all accounted for soon after Stop")
}

// An etcd that accepts connections and never answers (hung, or a black hole): Stop still
// returns in time, with or without records queued.
func TestEtcdCacheStopWithSilentEtcd(t *testing.T) {
	silent := silentEtcd(t)
	for _, queued := range []bool{false, true} {
		cfg := etcdConfig(silent, "/silent/")
		cfg.DialTimeout, cfg.RequestTimeout = 300*time.Millisecond, 300*time.Millisecond
		local, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
		require.NoError(t, err)
		c, err := etcdstore.New(cfg, local, telemetry.Settings{})
		require.NoError(t, err)
		require.NoError(t, c.Start(context.Background()))
		time.Sleep(500 * time.Millisecond)
		if queued {
			c.Put(replicasChange("web", "5", "6"))
			time.Sleep(100 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		start := time.Now()
		require.NoError(t, c.Stop(ctx), "queued=%v", queued)
		cancel()
		assert.Less(t, time.Since(start), 2*time.Second, "queued=%v", queued)
	}
}

// cutProxy forwards TCP connections to target until cut: then it closes them and refuses new
// ones until restored.
type cutProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{l: l, target: target}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.setCut(true) })
	return p
}

func (p *cutProxy) endpoint() string { return "http://" + p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// The follower is cut off while the leader writes and etcd compacts: when it reconnects, its
// watch fails with ErrCompacted and it loads the prefix again, so it has the records written
// meanwhile.
func TestEtcdCacheReloadAfterCompaction(t *testing.T) {
	srv := startEtcd(t)
	u, err := url.Parse(srv.endpoint)
	require.NoError(t, err)
	proxy := newCutProxy(t, u.Host)
	cfg := etcdConfig(srv.endpoint, "/compact/")
	cfg.RequestTimeout = 300 * time.Millisecond
	leader := newReplica(t, cfg)
	fcfg := cfg
	fcfg.Endpoints = []string{proxy.endpoint()}
	follower := newReplica(t, fcfg)
	follower.waitReady(t)
	q1 := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "5"}
	leader.cache.Put(replicasChange("web", "5", "6"))
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q1); return ok }, 10*time.Second, 10*time.Millisecond)

	proxy.setCut(true)
	cli := client(t, srv.endpoint)
	leader.cache.Put(replicasChange("web", "6", "7"))
	leader.cache.Put(replicasChange("web", "7", "8"))
	var rev int64
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/compact/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 3 {
			return false
		}
		rev = resp.Header.Revision
		return true
	}, 10*time.Second, 10*time.Millisecond)
	// Revisions after the leader's writes (outside the prefix), so that the follower's watch
	// revision is compacted.
	for range 3 {
		resp, err := cli.Put(t.Context(), "/unrelated", "x")
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	_, err = cli.Compact(t.Context(), rev)
	require.NoError(t, err)
	proxy.setCut(false)

	q3 := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "7"}
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q3); return ok }, 20*time.Second, 20*time.Millisecond,
		"the follower reloads after the compaction")
	_, ok := follower.cache.Find(changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "6"})
	assert.True(t, ok)
	assert.Positive(t, follower.counter(t, "kelemetry.diff.etcd.errors", "op", "watch"), "the compaction is counted")
}

// After a long outage the mirror's backoff has grown; once it has loaded and watches again, a
// later watch failure (here a compaction while it was cut off briefly) is retried at once, not
// after the outage's backoff.
func TestEtcdCacheBackoffResetsOnceWatching(t *testing.T) {
	srv := startEtcd(t)
	u, err := url.Parse(srv.endpoint)
	require.NoError(t, err)
	proxy := newCutProxy(t, u.Host)
	cfg := etcdConfig(srv.endpoint, "/backoff/")
	cfg.RequestTimeout = 300 * time.Millisecond
	leader := newReplica(t, cfg)
	leader.waitReady(t)
	proxy.setCut(true)
	fcfg := cfg
	fcfg.Endpoints = []string{proxy.endpoint()}
	follower := newReplica(t, fcfg)
	time.Sleep(5 * time.Second) // loads fail, the backoff grows to seconds
	proxy.setCut(false)
	select {
	case <-follower.cache.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("the follower did not load after the outage")
	}
	time.Sleep(500 * time.Millisecond) // watching, nothing to see

	proxy.setCut(true)
	leader.cache.Put(replicasChange("web", "5", "6"))
	cli := client(t, srv.endpoint)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), "/backoff/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 1
	}, 10*time.Second, 10*time.Millisecond)
	var rev int64
	for range 3 {
		resp, err := cli.Put(t.Context(), "/unrelated", "x")
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	_, err = cli.Compact(t.Context(), rev)
	require.NoError(t, err)
	proxy.setCut(false)
	restored := time.Now()
	q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "5"}
	require.Eventually(t, func() bool { _, ok := follower.cache.Find(q); return ok }, 20*time.Second, 20*time.Millisecond)
	assert.Less(t, time.Since(restored), 4*time.Second, "reloaded without the outage's backoff")
	t.Logf("reloaded %s after the connection came back", time.Since(restored).Round(time.Millisecond))
}

// waitLease waits until key (with opts, a prefix) exists and returns the lease of its first key.
func waitLease(t *testing.T, cli *clientv3.Client, key string, opts ...clientv3.OpOption) int64 {
	t.Helper()
	var lease int64
	require.Eventually(t, func() bool {
		resp, err := cli.Get(t.Context(), key, opts...)
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		lease = resp.Kvs[0].Lease
		return true
	}, 10*time.Second, 10*time.Millisecond)
	return lease
}
