package diff

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
)

func depKey(name, rv string) RecordKey {
	return RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func changeAt(name, base, rv, path string, at time.Time) Record {
	return Record{Key: depKey(name, rv), Kind: KindChange, BaseRV: base, Time: at,
		Changes: []Change{{Path: path, Op: OpReplace, Old: json.RawMessage("1"), New: json.RawMessage("2")}}}
}

func TestChangeCacheFindByTime(t *testing.T) {
	c, err := NewChangeCache(ChangeCacheConfig{}, nil)
	require.NoError(t, err)
	t0 := time.Now()
	obj := depKey("web", "").object()
	// Put out of resourceVersion order; "10" sorts before "9" as a string, not as a number.
	c.Put(changeAt("web", "9", "10", "spec.replicas", t0.Add(3*time.Millisecond)))
	c.Put(changeAt("web", "8", "9", "status.replicas", t0.Add(2*time.Millisecond)))
	c.Put(changeAt("web", "7", "8", "spec.paused", t0.Add(time.Millisecond)))
	c.Put(changeAt("web", "1", "2", "spec.paused", t0.Add(-time.Minute))) // before the request
	c.Put(changeAt("other", "7", "8", "spec.paused", t0))
	c.Put(Record{Key: depKey("web", "1"), Kind: KindCreation, UID: "u1", Time: t0.Add(-time.Minute)})
	c.Put(Record{Key: depKey("web", "11"), Kind: KindCreation, UID: "u2", Time: t0.Add(5 * time.Millisecond)})

	claimed := map[RecordKey]bool{}
	q := Query{Object: obj, Verb: "patch", Since: t0, Claimed: func(k RecordKey) bool { return claimed[k] }}
	pick := func(q Query) string {
		rec, ok := c.Find(q)
		if !ok {
			return ""
		}
		return rec.Key.ResourceVersion
	}
	assert.Equal(t, "8", pick(q), "the lowest resourceVersion since the request")
	claimed[depKey("web", "8")] = true
	assert.Equal(t, "10", pick(q), "claimed ones are skipped, status-only changes too")
	q.Subresource = "status"
	assert.Equal(t, "9", pick(q), "a status patch takes a status change")
	claimed[depKey("web", "9")] = true
	assert.Equal(t, "", pick(q))
	q.Subresource = ""
	q.Since = t0.Add(10 * time.Millisecond)
	assert.Equal(t, "", pick(q), "nothing seen since")

	cq := Query{Object: obj, Verb: "create", Since: t0}
	assert.Equal(t, "11", pick(cq))
	cq.UID = "u1"
	assert.Equal(t, "", pick(cq), "another UID")
	cq.UID, cq.Since = "", t0.Add(-2*time.Minute)
	assert.Equal(t, "1", pick(cq))

	// With a request resourceVersion, the change based on it, claimed or not.
	assert.Equal(t, "9", pick(Query{Object: obj, Verb: "update", RequestRV: "8", Claimed: q.Claimed}))

	// Delete removes a record from every index.
	assert.True(t, c.Delete(depKey("web", "10")))
	assert.False(t, c.Delete(depKey("web", "10")))
	q.Since = t0
	assert.Equal(t, "", pick(q))
	assert.Equal(t, "", pick(Query{Object: obj, Verb: "update", RequestRV: "9"}))
	assert.Equal(t, 6, c.Len())
}

func TestRVLess(t *testing.T) {
	assert.True(t, rvLess("9", "10"))
	assert.False(t, rvLess("10", "9"))
	assert.True(t, rvLess("a", "b"), "not numbers: as strings")
}

func TestEtcdKeyRoundTrip(t *testing.T) {
	for _, k := range []RecordKey{
		depKey("web", "12"),
		{Cluster: "c/1", Resource: "namespaces", Name: "kube-system", ResourceVersion: "3"}, // core, cluster-scoped
		{Cluster: "c1", Group: "example.com", Resource: "widgets", Namespace: "ns", Name: "a%b", ResourceVersion: "4"},
	} {
		key := etcdKey("/p/", k)
		assert.Equal(t, 6, strings.Count(strings.TrimPrefix(key, "/p/"), "/")+1, key)
		got, err := parseEtcdKey("/p/", key)
		require.NoError(t, err)
		assert.Equal(t, k, got)
	}
	assert.Equal(t, "/p/c1//pods/default/foo/7", etcdKey("/p/", RecordKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: "foo", ResourceVersion: "7"}))
	_, err := parseEtcdKey("/p/", "/q/a/b/c/d/e/f")
	require.Error(t, err)
	_, err = parseEtcdKey("/p/", "/p/a/b/c")
	require.Error(t, err)
}

func TestEtcdRecordCodec(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	big := `{"kind":"ConfigMap","data":{"k":"` + strings.Repeat("abcdefgh", 500) + `"}}`
	for _, rec := range []Record{
		changeAt("web", "5", "6", "spec.replicas", at),
		{Key: depKey("web", "7"), Kind: KindCreation, UID: "u", Snapshot: []byte(big), Time: at},
		{Key: depKey("web", "8"), Kind: KindDeletion, UID: "u", Snapshot: []byte(`{"a":1}`), Final: true, BaseRV: "7", Time: at},
	} {
		val, err := encodeRecord(&rec)
		require.NoError(t, err)
		got, err := decodeRecord(rec.Key, val)
		require.NoError(t, err)
		assert.True(t, got.Time.Equal(rec.Time))
		got.Time = rec.Time
		assert.Equal(t, rec, got)
		if len(rec.Snapshot) > 1000 {
			assert.Equal(t, byte(valueDeflated), val[0])
			assert.Less(t, len(val), len(big)/10, "deflated")
		} else {
			assert.Equal(t, byte(valuePlain), val[0])
		}
	}
	for _, bad := range [][]byte{nil, []byte("x{}"), []byte(`j{"k":9,"t":1}`), []byte("j{"), []byte("z\xff\xff")} {
		_, err := decodeRecord(depKey("web", "1"), bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestCacheConfigValidate(t *testing.T) {
	ok := EtcdCacheConfig{Endpoints: []string{"http://127.0.0.1:2379"}}
	require.NoError(t, CacheConfig{}.Validate())
	require.NoError(t, CacheConfig{Backend: "memory"}.Validate())
	require.NoError(t, CacheConfig{Backend: "etcd", Etcd: ok}.Validate())
	for name, c := range map[string]CacheConfig{
		"unknown backend": {Backend: "redis"},
		"no endpoints":    {Backend: "etcd"},
		"short ttl":       {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, TTL: time.Second}},
		"fractional ttl":  {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, TTL: 2500 * time.Millisecond}},
		"cert no key":     {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, CertFile: "c.pem"}},
		"password only":   {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, Password: "x"}},
		"prefix":          {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, Prefix: "/x"}},
		"negative":        {Backend: "etcd", Etcd: EtcdCacheConfig{Endpoints: ok.Endpoints, MaxQueue: -1}},
	} {
		assert.Error(t, c.Validate(), name)
	}
	// The module validates the backend too.
	err := InformerModuleConfig{Enabled: true, Cache: CacheConfig{Backend: "etcd"}}.Validate()
	require.ErrorContains(t, err, "the etcd backend needs endpoints")

	// Missing TLS files fail at construction, with the file named.
	local, err := NewChangeCache(ChangeCacheConfig{}, nil)
	require.NoError(t, err)
	_, err = NewEtcdCache(EtcdCacheConfig{Endpoints: ok.Endpoints, CAFile: "/nonexistent/ca.pem"}, local, nil, nil)
	require.ErrorContains(t, err, "/nonexistent/ca.pem")
}

// The etcd backend without a reachable etcd: the application starts (the connection is retried
// in the background), the records stay available to this process, and it stops in time.
func TestInformerModuleEtcdBackendUnreachable(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.set(podsGVR, "10", testPod("a", "5", "nginx:1"))
	var res InformerModuleResults
	app := fxtest.New(t,
		InformerModule,
		fx.Supply(InformerModuleConfig{Enabled: true, Informer: InformerConfig{Resources: []string{"pods"}},
			Cache: CacheConfig{Backend: BackendEtcd, Etcd: EtcdCacheConfig{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, RequestTimeout: 100 * time.Millisecond}}}),
		fx.Provide(func() kube.Clusters { return fakeClusters{dyn: dyn} }),
		fx.Invoke(func(ch Changes, cache *ChangeCache, e *EtcdCache) { res.Changes, res.Cache, res.Etcd = ch, cache, e }),
	)
	app.RequireStart()
	require.NotNil(t, res.Etcd)
	assert.Same(t, res.Etcd, res.Changes)
	assert.Same(t, res.Cache, res.Etcd.Local())
	w := <-dyn.watches
	w.Modify(&unstructured.Unstructured{Object: testPod("a", "11", "nginx:2")})
	waitRecord(t, res.Cache, podKey("a", "11"))
	rec, ok := res.Changes.Find(Query{Object: aggregator.ObjectKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: "a"}, Verb: "update", RequestRV: "5"})
	require.True(t, ok)
	assert.Equal(t, "11", rec.Key.ResourceVersion)
	start := time.Now()
	app.RequireStop()
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestWarnLimiter(t *testing.T) {
	l := warnLimiter{every: time.Second}
	now := time.Now()
	ok, _ := l.allow(now)
	assert.True(t, ok)
	ok, _ = l.allow(now.Add(time.Millisecond))
	assert.False(t, ok)
	ok, n := l.allow(now.Add(2 * time.Second))
	assert.True(t, ok)
	assert.Equal(t, 1, n)
}

func TestInformerModuleConfigYAML(t *testing.T) {
	const doc = `
enabled: true
leaderElection: {enabled: true}
cache:
  backend: etcd
  etcd:
    endpoints: ["https://etcd-0:2379", "https://etcd-1:2379"]
    prefix: /kelemetry/diff/
    ttl: 15m
    dialTimeout: 3s
    username: kelemetry
    passwordFile: /etc/kelemetry/etcd-password
    caFile: /etc/kelemetry/etcd-ca.pem
`
	var c InformerModuleConfig
	require.NoError(t, yaml.Unmarshal([]byte(doc), &c))
	require.NoError(t, c.Validate())
	assert.Equal(t, BackendEtcd, c.Cache.Backend)
	assert.Equal(t, 15*time.Minute, c.Cache.Etcd.TTL)
	assert.Equal(t, 3*time.Second, c.Cache.Etcd.DialTimeout)
	assert.Equal(t, []string{"https://etcd-0:2379", "https://etcd-1:2379"}, c.Cache.Etcd.Endpoints)
	assert.Equal(t, "/etc/kelemetry/etcd-password", c.Cache.Etcd.PasswordFile)
}
