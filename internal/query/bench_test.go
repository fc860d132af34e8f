package query_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// deployment1000Pods is a Deployment with one ReplicaSet and 1,000 Pods over 4 windows.
func deployment1000Pods() [][]*aggregator.Span { return deploymentPods(1000) }

// deploymentPods is a Deployment (obj("deployments", "web")) with one ReplicaSet and n Pods over
// 4 windows from w0.
func deploymentPods(n int) [][]*aggregator.Span { return benchdata.Deployment("c", "ns", n, 4, w0) }

// BenchmarkDeployment1000Pods is the target: find, follow, merge and draw (tracing, full
// tree) a Deployment with one ReplicaSet and 1,000 Pods over 4 windows, from the embedded
// (Pebble) store and, when the Jaeger binary the e2e tier builds is at hand, from Jaeger's memory
// backend through jaeger.storage.v2 (remote_storage), with and without the reader's cache.
func BenchmarkDeployment1000Pods(b *testing.B) {
	ctx := context.Background()
	b.Run("embedded", func(b *testing.B) {
		st, err := pebble.Open(ctx, pebble.Config{Dir: b.TempDir()}, 0, telemetry.Settings{})
		require.NoError(b, err)
		b.Cleanup(func() { _ = st.Stop(context.Background()) })
		for _, spans := range deployment1000Pods() {
			require.NoError(b, st.Export(ctx, spans))
		}
		benchTree(b, 1000, func() store.Reader { return st })
	})
	b.Run("jaeger", func(b *testing.B) {
		otlp, remote := startJaeger(b)
		w, err := jaeger.Open(ctx, jaeger.Config{Endpoint: remote, OTLP: otlpsink.Config{Endpoint: otlp}}, 0, telemetry.Settings{})
		require.NoError(b, err)
		require.NoError(b, w.Start(ctx))
		n := 0
		for _, spans := range deployment1000Pods() {
			require.NoError(b, w.Export(ctx, spans))
			n += len(spans)
		}
		require.NoError(b, w.Stop(ctx))
		open := func(b *testing.B) *jaeger.Store {
			r, err := jaeger.Open(ctx, jaeger.Config{Endpoint: remote}, 0, telemetry.Settings{})
			require.NoError(b, err)
			b.Cleanup(func() { _ = r.Stop(context.Background()) })
			return r
		}
		// cold: each query on a new reader (an empty cache); cached: one reader for all queries.
		b.Run("cold", func(b *testing.B) { benchTree(b, 1000, func() store.Reader { return open(b) }) })
		b.Run("cached", func(b *testing.B) {
			r := open(b)
			benchTree(b, 1000, func() store.Reader { return r })
		})
	})
}

// BenchmarkDeployment10000Pods is BenchmarkDeployment1000Pods/embedded with 10,000 Pods (about
// 160,000 spans, above the default span budget, so the engine is given 1,000,000); it reports the peak live heap of a query above the heap before it.
func BenchmarkDeployment10000Pods(b *testing.B) {
	ctx := context.Background()
	st, err := pebble.Open(ctx, pebble.Config{Dir: b.TempDir()}, 0, telemetry.Settings{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Stop(context.Background()) })
	for _, spans := range deploymentPods(10000) {
		require.NoError(b, st.Export(ctx, spans))
	}
	benchTree(b, 10000, func() store.Reader { return st })
}

// benchTree searches and draws the Deployment of deploymentPods(pods) from the reader reader
// returns for each query, and reports the highest live heap growth of a query (peak-heap-B/op)
// and the slowest query (max-ms).
func benchTree(b *testing.B, pods int, reader func() store.Reader) {
	ctx := context.Background()
	dep := obj("deployments", "web")
	q := query.Query{Resource: "deployments", Name: "web", From: w0, To: w0.Add(4*win - 1)}
	draw := func() error {
		engine := query.NewEngine(reader(), 0, query.Config{PerLevel: 2 * pods, Total: 2 * pods, MaxSpans: 100 * pods})
		gs, err := engine.Search(ctx, q, query.LinkFullTree)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		if len(gs) != 1 || len(gs[0].Objects) != pods+2 {
			return fmt.Errorf("search: %d results", len(gs))
		}
		tr := query.Render(gs[0], query.DisplayTracing, aggregator.TraceIDFor(dep.Key(), w0))
		if len(tr.Spans) != pods+2 {
			return fmt.Errorf("%d spans (truncated: %q)", len(tr.Spans), gs[0].Truncated)
		}
		return nil
	}
	// A backend that writes asynchronously shows everything a moment later.
	deadline := time.Now().Add(30 * time.Second)
	for err := draw(); err != nil; err = draw() {
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the poll interval
	}
	b.ReportAllocs()
	var slowest time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		err := draw()
		slowest = max(slowest, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The slowest query of the run: the target is every query under a bound, not the mean.
	b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
	// The peak heap is measured in further queries, outside the timed ones: its sampler (a
	// goroutine reading the runtime's metrics every millisecond) made the timed queries 7-12%
	// slower on two cores.
	runtime.GC()
	base := liveHeap()
	var peak uint64
	for range peakRuns {
		stop := peakHeap()
		err := draw()
		if p := stop(); p > peak {
			peak = p
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if peak > base {
		b.ReportMetric(float64(peak-base), "peak-heap-B/op")
	}
}

// peakRuns is how many untimed queries benchTree measures the peak heap of.
const peakRuns = 3

// countingWriter is a ResponseWriter that keeps only the size of the body.
type countingWriter struct {
	h    http.Header
	code int
	n    int64
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) WriteHeader(code int)        { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// peakHeap samples the live heap every millisecond until stop is called, which returns the
// highest value seen.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	read := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		read()
		return peak.Load()
	}
}

// BenchmarkFullTree100kSpans is the request (GET /api/traces?service=tree [full tree]
// &start=0&limit=1000) over a Deployment, a ReplicaSet and 1,000 Pods of 100 events each
// (about 102,000 stored spans in the memory store), without budgets and with the defaults.
// It reports the body size and the peak live heap during the request.
//
//	go test -run '^$' -bench FullTree100kSpans -benchtime 3x -benchmem ./internal/query/
func BenchmarkFullTree100kSpans(b *testing.B) {
	var w world
	dep, rs := obj("deployments", "web"), obj("replicasets", "web-1")
	w.link(dep, rs, w0, "children")
	for p := range 1000 {
		pod := obj("pods", fmt.Sprintf("web-1-%04d", p))
		w.link(rs, pod, w0, "children")
		for e := range 100 {
			// About the attributes of a recorded audit event.
			w.event(pod, w0.Add(time.Duration(e)*time.Second), fmt.Sprintf("%d-%d", p, e),
				aggregator.Attr{Key: aggregator.AttrVerb, Value: "patch"},
				aggregator.Attr{Key: aggregator.AttrUserAgent, Value: "kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abcdef0/system:serviceaccount:kube-system:replicaset-controller"},
				aggregator.Attr{Key: aggregator.AttrSourceIP, Value: "172.18.0.2"},
				aggregator.Attr{Key: aggregator.AttrStatusCode, Value: "200"},
				aggregator.Attr{Key: aggregator.AttrAuditID, Value: fmt.Sprintf("6f1e0c2a-3b4d-4e5f-8a9b-%012d", p*100+e)},
				aggregator.Attr{Key: aggregator.AttrSubresource, Value: "status"},
				aggregator.Attr{Key: "kelemetry.audit.request.uri", Value: fmt.Sprintf("/api/v1/namespaces/ns/pods/web-1-%04d/status?fieldManager=kubelet&resourceVersion=%d", p, e)},
				aggregator.Attr{Key: "kelemetry.object.resourceVersion", Value: fmt.Sprintf("%d", 100000+p*100+e)})
		}
	}
	st := memory.New(memory.Config{}, 0)
	require.NoError(b, st.Export(context.Background(), w.spans))
	b.Logf("%d stored spans", len(w.spans))
	w.spans = nil
	for _, c := range []struct {
		name string
		cfg  query.Config
	}{
		{"unbounded", query.Config{PerLevel: 2000, Total: 2000, MaxSpans: 1 << 30, MaxRenderBytes: 1 << 40}},
		{"defaults-wide", query.Config{PerLevel: 2000, Total: 2000}},
		{"defaults", query.Config{}},
		{"render16MiB", query.Config{PerLevel: 2000, Total: 2000, MaxRenderBytes: 16 << 20}},
		{"spans20k", query.Config{PerLevel: 2000, Total: 2000, MaxSpans: 20_000}},
	} {
		b.Run(c.name, func(b *testing.B) {
			mux := http.NewServeMux()
			query.NewJaegerAPI(query.NewEngine(st, 0, c.cfg), telemetry.Settings{}).Register(mux)
			req := httptest.NewRequest(http.MethodGet, "/api/traces?service=tree%20%5Bfull%20tree%5D&start=0&limit=1000", nil)
			var size int64
			var peak, before uint64
			for b.Loop() {
				runtime.GC()
				before = liveHeap()
				stop := peakHeap()
				rw := &countingWriter{h: http.Header{}}
				mux.ServeHTTP(rw, req)
				peak = max(peak, stop())
				if rw.code != http.StatusOK {
					b.Fatalf("status %d", rw.code)
				}
				size = rw.n
			}
			b.ReportMetric(float64(size)/(1<<20), "MiB-rendered")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-heap")
			b.ReportMetric(float64(peak-min(before, peak))/(1<<20), "MiB-peak-growth")
			if c.name != "defaults" {
				return
			}
			// Four at once, as the issue measured (4.26 GB before).
			runtime.GC()
			before = liveHeap()
			stop := peakHeap()
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { mux.ServeHTTP(&countingWriter{h: http.Header{}}, req) })
			}
			wg.Wait()
			peak4 := stop()
			b.ReportMetric(float64(peak4-min(before, peak4))/(1<<20), "MiB-peak-growth-4-parallel")

		})
	}
}
