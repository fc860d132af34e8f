// Package kubetest holds fakes of the kube package's dependencies for tests: a dynamic client
// serving objects from memory, a Clusters over such clients, an ObjectGetter over a map, a
// settable clock, a reader of the counters a meter provider collected, a kubeconfig file
// (WriteKubeconfig), and Pod objects and references to fill them with.
package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
)

// Clock is a settable clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock set to a fixed time.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Dynamic is a dynamic.Interface that serves Get from memory; every other method panics (nil
// embedded interface). Set Release, Started and Err before the Gets they should affect.
type Dynamic struct {
	dynamic.Interface

	// Release, when set, makes Get wait until it is closed (or the context ends).
	Release chan struct{}
	// Started, when set, receives a value from every Get before it waits for Release.
	Started chan struct{}
	// Err, when set, makes Get fail with it.
	Err error

	mu      sync.Mutex
	objects map[string]map[string]any // group/resource|namespace|name -> object
	gets    atomic.Int64
	rvs     []string // ResourceVersion of each Get
}

// NewDynamic returns an empty Dynamic.
func NewDynamic() *Dynamic { return &Dynamic{objects: map[string]map[string]any{}} }

func objectKey(gvr schema.GroupVersionResource, ns, name string) string {
	return fmt.Sprintf("%s|%s|%s", gvr.GroupResource(), ns, name)
}

// Add stores obj as a gvr object; its namespace and name come from its metadata.
func (f *Dynamic) Add(gvr schema.GroupVersionResource, obj map[string]any) {
	u := unstructured.Unstructured{Object: obj}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[objectKey(gvr, u.GetNamespace(), u.GetName())] = obj
}

// Gets returns the number of Get calls.
func (f *Dynamic) Gets() int64 { return f.gets.Load() }

// ResourceVersions returns the GetOptions.ResourceVersion of each Get call, in order.
func (f *Dynamic) ResourceVersions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rvs...)
}

// Resource returns the client of gvr.
func (f *Dynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &resource{f: f, gvr: gvr}
}

type resource struct {
	dynamic.NamespaceableResourceInterface
	f   *Dynamic
	gvr schema.GroupVersionResource
	ns  string
}

func (r *resource) Namespace(ns string) dynamic.ResourceInterface {
	c := *r
	c.ns = ns
	return &c
}

func (r *resource) Get(ctx context.Context, name string, opts metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	f := r.f
	f.gets.Add(1)
	f.mu.Lock()
	f.rvs = append(f.rvs, opts.ResourceVersion)
	release, started, ferr := f.Release, f.Started, f.Err
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if release != nil {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if ferr != nil {
		return nil, ferr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, ok := f.objects[objectKey(r.gvr, r.ns, name)]
	if !ok {
		return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
	}
	// Return a deep copy, as a real client does.
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	return u, nil
}

// Clusters is a kube.Clusters mapping cluster names to clients.
type Clusters map[string]dynamic.Interface

// Dynamic returns the cluster's client, or an error wrapping kube.ErrUnknownCluster.
func (c Clusters) Dynamic(cluster string) (dynamic.Interface, error) {
	d, ok := c[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", cluster, kube.ErrUnknownCluster)
	}
	return d, nil
}

// Getter is a kube.ObjectGetter over a map keyed by ObjectKey.
type Getter struct {
	Objects map[aggregator.ObjectKey]json.RawMessage
	// Err, when set, makes Get fail with it.
	Err   error
	calls atomic.Int64
}

// Get returns the object's body, or an error wrapping kube.ErrObjectNotFound.
func (g *Getter) Get(_ context.Context, ref aggregator.ObjectRef) (json.RawMessage, error) {
	g.calls.Add(1)
	if g.Err != nil {
		return nil, g.Err
	}
	body, ok := g.Objects[ref.Key()]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", ref, kube.ErrObjectNotFound)
	}
	return body, nil
}

// Calls returns the number of Get calls.
func (g *Getter) Calls() int64 { return g.calls.Load() }

// Metrics reads counters from an SDK meter provider.
type Metrics struct {
	Reader   *sdkmetric.ManualReader
	Provider *sdkmetric.MeterProvider
}

// NewMetrics returns a meter provider with a manual reader.
func NewMetrics() *Metrics {
	r := sdkmetric.NewManualReader()
	return &Metrics{Reader: r, Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// Count returns the sum of the int64 counter name over the points whose attribute key is value
// (an empty key: all points).
func (m *Metrics) Count(t testing.TB, name, key, value string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.Reader.Collect(context.Background(), &rm))
	want := attribute.NewSet(attribute.String(key, value))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			sum, ok := mt.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is not an int64 sum", name)
			for _, dp := range sum.DataPoints {
				if key == "" || dp.Attributes.Equivalent() == want.Equivalent() {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// PodsGVR is the resource of core v1 Pods.
var PodsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// PodRef returns the reference of a v1 Pod.
func PodRef(cluster, ns, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: cluster, Version: "v1", Resource: "pods", Namespace: ns, Name: name}
}

// PodObject returns a v1 Pod with the uid "uid-<name>" and the extra top-level members.
func PodObject(ns, name string, extra map[string]any) map[string]any {
	meta := map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name}
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta}
	for k, v := range extra {
		obj[k] = v
	}
	return obj
}

// kubeconfig is a kubeconfig with two clusters, a (https://a.example:6443, current context
// ctx-a) and b (https://b.example:6443, context ctx-b), and a token user.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

// WriteKubeconfig writes Kubeconfig into a temporary folder of t and returns its path.
func WriteKubeconfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
