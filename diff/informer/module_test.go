package informer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/aggregator"
	etcdcfg "github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	leadercfg "github.com/kelemetry/kelemetry/diff/leader"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/etcdstore"
	informerimpl "github.com/kelemetry/kelemetry/internal/informer"
	"github.com/kelemetry/kelemetry/internal/informer/informertest"
	"github.com/kelemetry/kelemetry/internal/leader"
	"github.com/kelemetry/kelemetry/internal/leasefake"
	"github.com/kelemetry/kelemetry/kube"
)

type fakeClusters struct{ dyn *informertest.Dynamic }

func (f fakeClusters) Names() []string { return []string{"c1"} }
func (f fakeClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	if cluster != "c1" {
		return nil, kube.ErrUnknownCluster
	}
	return f.dyn, nil
}
func (f fakeClusters) Discovery(string) (kube.ResourceDiscoverer, error) {
	return informertest.Discovery{}, nil
}

func TestInformerModule(t *testing.T) {
	dyn := informertest.NewDynamic()
	var res moduleResult
	app := fxtest.New(t,
		Module,
		fx.Supply(ModuleConfig{Enabled: true, Informer: Config{Resources: []string{"pods"}}}),
		fx.Provide(func() kube.Clusters { return fakeClusters{dyn: dyn} }),
		fx.Invoke(func(cache *changes.Cache, ins []*informerimpl.Informer) { res.Cache, res.Informers = cache, ins }),
	)
	app.RequireStart()
	require.NotNil(t, res.Cache)
	require.Len(t, res.Informers, 1)
	select {
	case <-dyn.Watches:
	case <-time.After(5 * time.Second):
		t.Fatal("the informer did not start watching")
	}
	app.RequireStop()

	// Off, or without clients: no cache.
	app = fxtest.New(t, Module, fx.Invoke(func(cache *changes.Cache) { assert.Nil(t, cache) }))
	app.RequireStart().RequireStop()
}

// The etcd backend without a reachable etcd: the application starts (the connection is retried
// in the background), the records stay available to this process, and it stops in time.
func TestInformerModuleEtcdBackendUnreachable(t *testing.T) {
	dyn := informertest.NewDynamic()
	dyn.Set(informertest.PodsGVR, "10", informertest.Pod("a", "5", "nginx:1"))
	var res moduleResult
	app := fxtest.New(t,
		Module,
		fx.Supply(ModuleConfig{Enabled: true, Informer: Config{Resources: []string{"pods"}},
			Cache: StoreConfig{Backend: BackendEtcd, Etcd: etcdcfg.Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond, RequestTimeout: 100 * time.Millisecond}}}),
		fx.Provide(func() kube.Clusters { return fakeClusters{dyn: dyn} }),
		fx.Invoke(func(ch changes.Store, cache *changes.Cache, e *etcdstore.Store) {
			res.Changes, res.Cache, res.Etcd = ch, cache, e
		}),
	)
	app.RequireStart()
	require.NotNil(t, res.Etcd)
	assert.Same(t, res.Etcd, res.Changes)
	assert.Same(t, res.Cache, res.Etcd.Local())
	w := <-dyn.Watches
	w.Modify(&unstructured.Unstructured{Object: informertest.Pod("a", "11", "nginx:2")})
	informertest.WaitRecord(t, res.Cache, informertest.PodKey("a", "11"))
	rec, ok := res.Changes.Find(changes.Query{Object: aggregator.ObjectKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: "a"}, Verb: "update", RequestRV: "5"})
	require.True(t, ok)
	assert.Equal(t, "11", rec.Key.ResourceVersion)
	start := time.Now()
	app.RequireStop()
	assert.Less(t, time.Since(start), 5*time.Second)
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
	var c ModuleConfig
	require.NoError(t, yaml.Unmarshal([]byte(doc), &c))
	require.NoError(t, c.Validate())
	assert.Equal(t, BackendEtcd, c.Cache.Backend)
	assert.Equal(t, 15*time.Minute, c.Cache.Etcd.TTL)
	assert.Equal(t, 3*time.Second, c.Cache.Etcd.DialTimeout)
	assert.Equal(t, []string{"https://etcd-0:2379", "https://etcd-1:2379"}, c.Cache.Etcd.Endpoints)
	assert.Equal(t, "/etc/kelemetry/etcd-password", c.Cache.Etcd.PasswordFile)
}

// routedDynamic sends Leases to one client and every other resource to another.
type routedDynamic struct {
	dynamic.Interface
	leases dynamic.Interface
}

func (r routedDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if gvr == leader.LeaseGVR {
		return r.leases.Resource(gvr)
	}
	return r.Interface.Resource(gvr)
}

type routedClusters struct{ dyn dynamic.Interface }

func (routedClusters) Names() []string { return []string{"c1"} }
func (c routedClusters) Dynamic(string) (dynamic.Interface, error) {
	return c.dyn, nil
}
func (routedClusters) Discovery(string) (kube.ResourceDiscoverer, error) {
	return informertest.Discovery{}, nil
}

// The module with leader election: the informer records once the replica leads, and stopping
// the application releases the Lease.
func TestInformerModuleLeaderElection(t *testing.T) {
	srv, leases := leasefake.NewServer(t)
	dyn := informertest.NewDynamic()
	dyn.Set(informertest.PodsGVR, "10", informertest.Pod("a", "5", "nginx:1"))
	var res moduleResult
	le := fastElection("replica-1")
	app := fxtest.New(t,
		Module,
		fx.Supply(ModuleConfig{Enabled: true, Informer: Config{Resources: []string{"pods"}}, LeaderElection: le}),
		fx.Provide(func() kube.Clusters { return routedClusters{dyn: routedDynamic{Interface: dyn, leases: leases}} }),
		fx.Invoke(func(cache *changes.Cache, ins []*informerimpl.Informer, e *leader.Elector) {
			res.Cache, res.Informers, res.Elector = cache, ins, e
		}),
	)
	app.RequireStart()
	require.NotNil(t, res.Elector)
	require.Eventually(t, res.Elector.Leading, 5*time.Second, 5*time.Millisecond)
	w := <-dyn.Watches
	w.Modify(&unstructured.Unstructured{Object: informertest.Pod("a", "11", "nginx:2")})
	informertest.WaitRecord(t, res.Cache, informertest.PodKey("a", "11"))
	assert.Equal(t, "replica-1", srv.Holder("kelemetry/"+leadercfg.DefaultLeaseName))
	app.RequireStop()
	assert.False(t, res.Elector.Leading())
	assert.Equal(t, "", srv.Holder("kelemetry/"+leadercfg.DefaultLeaseName), "released on stop")
}

func fastElection(identity string) leadercfg.Config {
	return leadercfg.Config{Enabled: true, Identity: identity, LeaseNamespace: "kelemetry",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 100 * time.Millisecond}
}

// The module validates its parts' configurations, and that the leader election's cluster is
// watched.
func TestModuleConfigValidate(t *testing.T) {
	require.Error(t, ModuleConfig{Clusters: []string{"a"}, LeaderElection: leadercfg.Config{Enabled: true, Cluster: "b"}}.Validate())
	err := ModuleConfig{Enabled: true, Cache: StoreConfig{Backend: "etcd"}}.Validate()
	require.ErrorContains(t, err, "the etcd backend needs endpoints")
}

func TestStoreConfigValidate(t *testing.T) {
	ok := etcdcfg.Config{Endpoints: []string{"http://127.0.0.1:2379"}}
	require.NoError(t, StoreConfig{}.Validate())
	require.NoError(t, StoreConfig{Backend: "memory"}.Validate())
	require.NoError(t, StoreConfig{Backend: "etcd", Etcd: ok}.Validate())
	for name, c := range map[string]StoreConfig{
		"unknown backend": {Backend: "redis"},
		"no endpoints":    {Backend: "etcd"},
		"short ttl":       {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, TTL: time.Second}},
		"fractional ttl":  {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, TTL: 2500 * time.Millisecond}},
		"cert no key":     {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, CertFile: "c.pem"}},
		"password only":   {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, Password: "x"}},
		"prefix":          {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, Prefix: "/x"}},
		"negative":        {Backend: "etcd", Etcd: etcdcfg.Config{Endpoints: ok.Endpoints, MaxQueue: -1}},
	} {
		assert.Error(t, c.Validate(), name)
	}
}
