package linker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeDynamic is a dynamic.Interface that serves Get from a map; every other method panics (nil
// embedded interface).
type fakeDynamic struct {
	dynamic.Interface

	mu      sync.Mutex
	objects map[string]map[string]any // gvr|namespace|name -> object
	gets    atomic.Int64
	rvs     []string      // ResourceVersion of each Get
	release chan struct{} // when set, Get waits for it to be closed
	started chan struct{} // when set, Get sends on it before waiting
	err     error         // when set, Get fails with it
}

func newFakeDynamic() *fakeDynamic { return &fakeDynamic{objects: map[string]map[string]any{}} }

func fakeKey(gvr schema.GroupVersionResource, ns, name string) string {
	return fmt.Sprintf("%s|%s|%s", gvr.GroupResource(), ns, name)
}

func (f *fakeDynamic) add(gvr schema.GroupVersionResource, obj map[string]any) {
	u := unstructured.Unstructured{Object: obj}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[fakeKey(gvr, u.GetNamespace(), u.GetName())] = obj
}

func (f *fakeDynamic) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{f: f, gvr: gvr}
}

type fakeResource struct {
	dynamic.NamespaceableResourceInterface
	f   *fakeDynamic
	gvr schema.GroupVersionResource
	ns  string
}

func (r *fakeResource) Namespace(ns string) dynamic.ResourceInterface {
	c := *r
	c.ns = ns
	return &c
}

func (r *fakeResource) Get(ctx context.Context, name string, opts metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	f := r.f
	f.gets.Add(1)
	f.mu.Lock()
	f.rvs = append(f.rvs, opts.ResourceVersion)
	release, started, ferr := f.release, f.started, f.err
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
	obj, ok := f.objects[fakeKey(r.gvr, r.ns, name)]
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

// fakeClusters maps cluster names to clients.
type fakeClusters map[string]dynamic.Interface

func (c fakeClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	d, ok := c[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", cluster, ErrUnknownCluster)
	}
	return d, nil
}

// mapGetter is an ObjectGetter over a map keyed by ObjectKey.
type mapGetter struct {
	objects map[aggregator.ObjectKey]json.RawMessage
	err     error
	calls   atomic.Int64
}

func (g *mapGetter) Get(_ context.Context, ref aggregator.ObjectRef) (json.RawMessage, error) {
	g.calls.Add(1)
	if g.err != nil {
		return nil, g.err
	}
	body, ok := g.objects[ref.Key()]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", ref, ErrObjectNotFound)
	}
	return body, nil
}

// metrics reads counters from an SDK meter provider.
type metrics struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newMetrics() *metrics {
	r := sdkmetric.NewManualReader()
	return &metrics{reader: r, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

// count returns the sum of counter name over the points whose attribute key is value ("" key:
// all points).
func (m *metrics) count(t *testing.T, name, key, value string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
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

func readTestdata(t testing.TB, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func podRef(cluster, ns, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: cluster, Version: "v1", Resource: "pods", Namespace: ns, Name: name}
}

func podObject(ns, name string, extra map[string]any) map[string]any {
	meta := map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name}
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta}
	for k, v := range extra {
		obj[k] = v
	}
	return obj
}
