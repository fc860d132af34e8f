// Package informertest holds fakes for the tests of the informer diff source (internal/informer)
// and of its module (diff/informer): a dynamic client that lists and watches, a discovery client
// and a Pod.
package informertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Dynamic implements the part of dynamic.Interface the Informer uses: List and Watch of a
// resource across namespaces. Each Watch call hands the test a fake watcher on Watches.
type Dynamic struct {
	dynamic.Interface
	// Watches receives the watcher of each Watch call.
	Watches chan *watch.RaceFreeFakeWatcher

	mu      sync.Mutex
	lists   map[schema.GroupVersionResource][]unstructured.Unstructured
	listRV  string
	listErr error
	failed  int // lists answered with listErr
}

// NewDynamic returns a Dynamic that lists nothing at resourceVersion 1.
func NewDynamic() *Dynamic {
	return &Dynamic{lists: map[schema.GroupVersionResource][]unstructured.Unstructured{}, listRV: "1",
		Watches: make(chan *watch.RaceFreeFakeWatcher, 16)}
}

// Set makes a list of gvr return objs at resourceVersion rv.
func (f *Dynamic) Set(gvr schema.GroupVersionResource, rv string, objs ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listRV = rv
	f.lists[gvr] = nil
	for _, o := range objs {
		f.lists[gvr] = append(f.lists[gvr], unstructured.Unstructured{Object: o})
	}
}

// SetListErr makes every list fail with err (nil: succeed again).
func (f *Dynamic) SetListErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr = err
}

// Failed returns how many lists failed with the error SetListErr set.
func (f *Dynamic) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Resource returns the client of gvr.
func (f *Dynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &resource{f: f, gvr: gvr}
}

type resource struct {
	dynamic.NamespaceableResourceInterface
	f   *Dynamic
	gvr schema.GroupVersionResource
}

func (r *resource) List(_ context.Context, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if r.f.listErr != nil {
		r.f.failed++
		return nil, r.f.listErr
	}
	l := &unstructured.UnstructuredList{Object: map[string]any{}}
	for _, u := range r.f.lists[r.gvr] {
		l.Items = append(l.Items, *u.DeepCopy())
	}
	l.SetResourceVersion(r.f.listRV)
	return l, nil
}

func (r *resource) Watch(_ context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewRaceFreeFake()
	r.f.Watches <- w
	return w, nil
}

// Discovery lists pods (with pods/status), secrets, events and bindings in the core group,
// apps/v1 and apps/v1beta1 deployments and coordination.k8s.io/v1 leases.
type Discovery struct{}

// ServerGroupsAndResources returns the groups and resources Discovery lists.
func (Discovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	verbs := metav1.Verbs{"get", "list", "watch"}
	return []*metav1.APIGroup{
			{Name: "", PreferredVersion: metav1.GroupVersionForDiscovery{Version: "v1"}},
			{Name: "apps", PreferredVersion: metav1.GroupVersionForDiscovery{Version: "v1"}},
		}, []*metav1.APIResourceList{
			{GroupVersion: "v1", APIResources: []metav1.APIResource{
				{Name: "pods", Verbs: verbs}, {Name: "pods/status", Verbs: verbs}, {Name: "secrets", Verbs: verbs},
				{Name: "events", Verbs: verbs}, {Name: "bindings", Verbs: metav1.Verbs{"create"}},
			}},
			{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Verbs: verbs}}},
			{GroupVersion: "apps/v1beta1", APIResources: []metav1.APIResource{{Name: "deployments", Verbs: verbs}}},
			{GroupVersion: "coordination.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "leases", Verbs: verbs}}},
		}, nil
}

// PodsGVR is the resource of Pod objects.
var PodsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Pod returns a Pod default/name (UID uid-<name>) at resourceVersion rv, with one container of
// image and a managedFields entry.
func Pod(name, rv, image string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": rv,
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update"}}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
	}
}

// WaitRecord waits until cache holds the record of key and returns it.
func WaitRecord(t *testing.T, cache *changes.Cache, key changes.RecordKey) changes.Record {
	t.Helper()
	var rec changes.Record
	require.Eventually(t, func() bool {
		var ok bool
		rec, ok = cache.Get(key)
		return ok
	}, 5*time.Second, time.Millisecond, "record %+v", key)
	return rec
}

// PodKey is the record key of pod name in namespace default of cluster c1 at resourceVersion rv.
func PodKey(name, rv string) changes.RecordKey {
	return changes.RecordKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: name, ResourceVersion: rv}
}
