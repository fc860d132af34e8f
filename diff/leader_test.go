package diff

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kelemetry/kelemetry/linker"
)

// leaseServer is a minimal API server for coordination.k8s.io/v1 Leases with optimistic
// concurrency (a PUT with a stale resourceVersion gets 409), as kube-apiserver does: what the
// leader election relies on.
type leaseServer struct {
	mu     sync.Mutex
	rv     int
	leases map[string]map[string]any // namespace/name -> object
	writes int
}

func newLeaseServer(t *testing.T) (*leaseServer, dynamic.Interface) {
	t.Helper()
	s := &leaseServer{leases: map[string]map[string]any{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	require.NoError(t, err)
	return s, dyn
}

func (s *leaseServer) status(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"reason": reason, "code": code, "message": reason})
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	// /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/"), "/")
	if len(parts) < 2 || parts[1] != "leases" {
		s.status(w, http.StatusNotFound, "NotFound")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := parts[0]
	var obj map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPut {
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &obj); err != nil {
			s.status(w, http.StatusBadRequest, "BadRequest")
			return
		}
	}
	switch {
	case r.Method == http.MethodGet && len(parts) == 3:
		if l, ok := s.leases[ns+"/"+parts[2]]; ok {
			_ = json.NewEncoder(w).Encode(l)
			return
		}
		s.status(w, http.StatusNotFound, "NotFound")
	case r.Method == http.MethodPost && len(parts) == 2:
		u := unstructured.Unstructured{Object: obj}
		key := ns + "/" + u.GetName()
		if _, ok := s.leases[key]; ok {
			s.status(w, http.StatusConflict, "AlreadyExists")
			return
		}
		s.store(key, u)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(u.Object)
	case r.Method == http.MethodPut && len(parts) == 3:
		u := unstructured.Unstructured{Object: obj}
		key := ns + "/" + parts[2]
		old, ok := s.leases[key]
		if !ok {
			s.status(w, http.StatusNotFound, "NotFound")
			return
		}
		if u.GetResourceVersion() != (&unstructured.Unstructured{Object: old}).GetResourceVersion() {
			s.status(w, http.StatusConflict, "Conflict")
			return
		}
		s.store(key, u)
		_ = json.NewEncoder(w).Encode(u.Object)
	default:
		s.status(w, http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
}

func (s *leaseServer) store(key string, u unstructured.Unstructured) {
	s.rv++
	s.writes++
	u.SetResourceVersion(strconv.Itoa(s.rv))
	s.leases[key] = u.Object
}

func (s *leaseServer) holder(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[key]
	if !ok {
		return ""
	}
	h, _, _ := unstructured.NestedString(l, "spec", "holderIdentity")
	return h
}

func fastElection(identity string) LeaderElectionConfig {
	return LeaderElectionConfig{Enabled: true, Identity: identity, LeaseNamespace: "kelemetry",
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 100 * time.Millisecond}
}

func TestLeaderElectionConfig(t *testing.T) {
	c := LeaderElectionConfig{}.WithDefaults()
	assert.Equal(t, DefaultLeaseName, c.LeaseName)
	assert.Equal(t, DefaultLeaseNamespace, c.LeaseNamespace)
	assert.NotEmpty(t, c.Identity)
	assert.Equal(t, DefaultLeaseDuration, c.LeaseDuration)
	require.NoError(t, LeaderElectionConfig{Enabled: true}.Validate())
	require.NoError(t, LeaderElectionConfig{RenewDeadline: time.Hour}.Validate(), "off: not checked")
	require.Error(t, LeaderElectionConfig{Enabled: true, LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}.Validate())
	require.Error(t, LeaderElectionConfig{Enabled: true, RenewDeadline: time.Second, RetryPeriod: time.Second}.Validate())
	require.Error(t, LeaderElectionConfig{Enabled: true, RetryPeriod: -time.Second}.Validate())
	require.Error(t, LeaderElectionConfig{Enabled: true, LeaseDuration: 900 * time.Millisecond, RenewDeadline: 500 * time.Millisecond}.Validate(), "whole seconds")
	require.Error(t, InformerModuleConfig{Clusters: []string{"a"}, LeaderElection: LeaderElectionConfig{Enabled: true, Cluster: "b"}}.Validate())
	_, err := NewElector(LeaderElectionConfig{}, nil, nil)
	require.Error(t, err)
}

// Two replicas: exactly one leads at a time; when the leader stops it releases the Lease and
// the other takes over well before the lease duration runs out.
func TestElectorOneLeaderAndFailover(t *testing.T) {
	srv, dyn := newLeaseServer(t)
	a, err := NewElector(fastElection("a"), dyn, nil)
	require.NoError(t, err)
	b, err := NewElector(fastElection("b"), dyn, nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { _ = a.Stop(ctx) })
	require.Error(t, a.Start(ctx), "start twice")
	require.Eventually(t, a.Leading, 5*time.Second, 5*time.Millisecond, "the first replica leads")
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(ctx) })
	key := "kelemetry/" + DefaultLeaseName
	assert.Equal(t, "a", srv.holder(key))

	// For several renewals: a keeps the Lease, b never leads. The lease is long compared to the
	// retry period so that a starved CPU (CI runs packages in parallel) cannot expire it.
	require.Never(t, func() bool { return !a.Leading() || b.Leading() }, 1500*time.Millisecond, 10*time.Millisecond,
		"the leader lost the Lease while renewing it, or two led at once")
	assert.False(t, b.Leading())

	stopped := time.Now()
	require.NoError(t, a.Stop(ctx))
	assert.False(t, a.Leading(), "a stopped replica does not lead")
	require.Eventually(t, b.Leading, 5*time.Second, 5*time.Millisecond, "the other replica takes over")
	assert.Equal(t, "b", srv.holder(key))
	assert.Less(t, time.Since(stopped), 3*time.Second, "released, not expired (the lease runs 4s)")
	require.NoError(t, a.Stop(ctx), "stop twice")
}

// Only the leading Informer records; a follower keeps the last versions and records from the
// first change after it starts leading.
func TestInformerRecordsOnlyWhileLeading(t *testing.T) {
	dyn := newFakeDynamic()
	dyn.set(podsGVR, "10", testPod("a", "5", "nginx:1"))
	in, cache := newTestInformer(t, dyn, InformerConfig{Resources: []string{"pods"}})
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
	w := <-dyn.watches

	w.Modify(&unstructured.Unstructured{Object: testPod("a", "11", "nginx:2")})
	w.Add(&unstructured.Unstructured{Object: testPod("b", "12", "redis")})
	require.Eventually(t, func() bool { return in.Objects() == 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, cache.Len(), "a follower records nothing")

	mu.Lock()
	leading = true
	mu.Unlock()
	w.Modify(&unstructured.Unstructured{Object: testPod("a", "13", "nginx:3")})
	rec := waitRecord(t, cache, podKey("a", "13"))
	assert.Equal(t, KindChange, rec.Kind)
	assert.Equal(t, "11", rec.BaseRV, "the follower kept the version it saw")
	require.Len(t, rec.Changes, 1)
	assert.Equal(t, "spec.containers[name=app].image nginx:2 -> nginx:3", rec.Changes[0].String())
	_, ok := cache.Get(podKey("a", "11"))
	assert.False(t, ok)
}

// routedDynamic sends Leases to one client and every other resource to another.
type routedDynamic struct {
	dynamic.Interface
	leases dynamic.Interface
}

func (r routedDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	if gvr == leaseGVR {
		return r.leases.Resource(gvr)
	}
	return r.Interface.Resource(gvr)
}

type routedClusters struct{ dyn dynamic.Interface }

func (routedClusters) Names() []string { return []string{"c1"} }
func (c routedClusters) Dynamic(string) (dynamic.Interface, error) {
	return c.dyn, nil
}
func (routedClusters) Discovery(string) (linker.ResourceDiscoverer, error) {
	return fakeDiscovery{}, nil
}

// The module with leader election: the informer records once the replica leads, and stopping
// the application releases the Lease.
func TestInformerModuleLeaderElection(t *testing.T) {
	srv, leases := newLeaseServer(t)
	dyn := newFakeDynamic()
	dyn.set(podsGVR, "10", testPod("a", "5", "nginx:1"))
	var res InformerModuleResults
	le := fastElection("replica-1")
	app := fxtest.New(t,
		InformerModule,
		fx.Supply(InformerModuleConfig{Enabled: true, Informer: InformerConfig{Resources: []string{"pods"}}, LeaderElection: le}),
		fx.Provide(func() linker.Clusters { return routedClusters{dyn: routedDynamic{Interface: dyn, leases: leases}} }),
		fx.Invoke(func(cache *ChangeCache, ins []*Informer, e *Elector) {
			res.Cache, res.Informers, res.Elector = cache, ins, e
		}),
	)
	app.RequireStart()
	require.NotNil(t, res.Elector)
	require.Eventually(t, res.Elector.Leading, 5*time.Second, 5*time.Millisecond)
	w := <-dyn.watches
	w.Modify(&unstructured.Unstructured{Object: testPod("a", "11", "nginx:2")})
	waitRecord(t, res.Cache, podKey("a", "11"))
	assert.Equal(t, "replica-1", srv.holder("kelemetry/"+DefaultLeaseName))
	app.RequireStop()
	assert.False(t, res.Elector.Leading())
	assert.Equal(t, "", srv.holder("kelemetry/"+DefaultLeaseName), "released on stop")
}
