package etcdcache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kelemetry/kelemetry/diff/informer"
	leadercfg "github.com/kelemetry/kelemetry/diff/leader"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/leader"
	"github.com/kelemetry/kelemetry/kube"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	leasesGVR      = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// oneCluster serves one fake cluster "c1" to informer.Module.
type oneCluster struct{ dyn dynamic.Interface }

func (oneCluster) Names() []string { return []string{"c1"} }
func (c oneCluster) Dynamic(string) (dynamic.Interface, error) {
	return c.dyn, nil
}
func (oneCluster) Discovery(string) (kube.ResourceDiscoverer, error) { return deploymentsOnly{}, nil }

type replicaApp struct {
	app     *fxtest.App
	changes changes.Store
	elector *leader.Elector
}

// startReplica starts one replica's informer diff source: leader election on a Lease of the
// fake cluster, records through etcd.
func startReplica(t *testing.T, dyn dynamic.Interface, endpoint, identity string) *replicaApp {
	t.Helper()
	r := &replicaApp{}
	cfg := informer.ModuleConfig{
		Enabled:  true,
		Informer: informer.Config{Resources: []string{"apps/deployments"}},
		LeaderElection: leadercfg.Config{Enabled: true, Identity: identity,
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		Cache: informer.StoreConfig{Backend: informer.BackendEtcd, Etcd: etcdConfig(endpoint, "/replicas/")},
	}
	r.app = fxtest.New(t,
		fx.NopLogger,
		informer.Module,
		fx.Supply(cfg),
		fx.Provide(func() kube.Clusters { return oneCluster{dyn: dyn} }),
		fx.Invoke(func(ch changes.Store, e *leader.Elector) { r.changes, r.elector = ch, e }),
	)
	r.app.RequireStart()
	return r
}

func putDeployment(t *testing.T, dyn dynamic.Interface, rv string, replicas int64, create bool) {
	t.Helper()
	obj := deployment("web", "uid-1", rv, replicas)
	var err error
	if create {
		_, err = dyn.Resource(deploymentsGVR).Namespace("default").Create(t.Context(), obj, metav1.CreateOptions{})
	} else {
		_, err = dyn.Resource(deploymentsGVR).Namespace("default").Update(t.Context(), obj, metav1.UpdateOptions{})
	}
	require.NoError(t, err)
}

// Two replicas, each with informer.Module (informer, leader election, etcd cache) on one
// cluster and one etcd: only the leader writes, the follower finds the leader's records; when
// the leader stops, the follower takes over and records from the next change on, with the diff
// from the version it kept while following.
func TestEtcdCacheTwoReplicasLeaderElection(t *testing.T) {
	srv := startEtcd(t)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		deploymentsGVR: "DeploymentList", leasesGVR: "LeaseList",
	})
	// Count the informers' watches of Deployments (each starts after its list).
	var watches atomic.Int32
	dyn.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches.Add(1)
		return false, nil, nil // the tracker serves the watch
	})
	r1 := startReplica(t, dyn, srv.endpoint, "replica-1")
	require.Eventually(t, r1.elector.Leading, 10*time.Second, 10*time.Millisecond, "replica-1 leads")
	r2 := startReplica(t, dyn, srv.endpoint, "replica-2")
	t.Cleanup(r2.app.RequireStop)
	leader, follower := r1, r2
	assert.False(t, follower.elector.Leading())

	// Both informers list and watch before the writes (the first list records nothing).
	require.Eventually(t, func() bool { return watches.Load() >= 2 }, 10*time.Second, 5*time.Millisecond, "both informers watch")
	time.Sleep(50 * time.Millisecond) // from the reactor to the tracker's registration of the watch
	putDeployment(t, dyn, "100", 1, true)
	putDeployment(t, dyn, "101", 3, false)
	q := changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "100"}
	require.Eventually(t, func() bool { _, ok := follower.changes.Find(q); return ok }, 10*time.Second, 10*time.Millisecond,
		"the follower finds the leader's record")
	rec, _ := follower.changes.Find(q)
	assert.Equal(t, "101", rec.Key.ResourceVersion)
	assert.Equal(t, "spec.replicas", rec.Changes[0].Path)
	_, ok := follower.changes.Find(changes.Query{Object: deployObject("web"), Verb: "create", Since: time.Now().Add(-time.Minute)})
	assert.True(t, ok, "and the creation snapshot")

	// Failover: the leader stops (releasing the Lease); the other replica leads and records.
	leader.app.RequireStop()
	require.Eventually(t, follower.elector.Leading, 15*time.Second, 10*time.Millisecond, "replica-2 takes over")
	putDeployment(t, dyn, "102", 5, false)
	q = changes.Query{Object: deployObject("web"), Verb: "update", RequestRV: "101"}
	require.Eventually(t, func() bool { _, ok := follower.changes.Find(q); return ok }, 10*time.Second, 10*time.Millisecond)
	rec, _ = follower.changes.Find(q)
	require.Len(t, rec.Changes, 1)
	assert.Equal(t, "3", string(rec.Changes[0].Old))
	assert.Equal(t, "5", string(rec.Changes[0].New))

	cli := client(t, srv.endpoint)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, "/replicas/c1/apps/deployments/default/web/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false
		}
		var keys []string
		for _, kv := range resp.Kvs {
			keys = append(keys, string(kv.Key))
		}
		return assert.ObjectsAreEqual([]string{
			"/replicas/c1/apps/deployments/default/web/100",
			"/replicas/c1/apps/deployments/default/web/101",
			"/replicas/c1/apps/deployments/default/web/102",
		}, keys)
	}, 5*time.Second, 20*time.Millisecond, "the creation and both changes are in etcd, each written once")
}
