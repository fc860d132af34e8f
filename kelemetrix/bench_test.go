package kelemetrix

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// benchEvents are the rollout and bulk fixtures' events (reads, writes, watches, errors).
func benchEvents(b *testing.B) []*auditv1.Event {
	b.Helper()
	evs := readFixture(b, filepath.Join("..", "testdata", "rollout", "audit.jsonl"))
	return append(evs, readFixture(b, gunzipFixture(b, filepath.Join("..", "testdata", "bulk", "audit.jsonl.gz")))...)
}

// BenchmarkDefaultConfig measures the processor's own goroutine: the default config's metric
// updates per second (one core: go test -bench DefaultConfig -cpu 1), recorded into the
// OpenTelemetry SDK exported to Prometheus, as /metrics has it.
func BenchmarkDefaultConfig(b *testing.B) {
	evs := benchEvents(b)
	prom := newPromProvider(b)
	p, err := New(loadDefault(b), prom.settings())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	p.Handle(ctx, "bench", evs) // the series exist: measure the steady state
	start, updates := time.Now(), p.Updates()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.Handle(ctx, "bench", evs)
	}
	b.StopTimer()
	secs := time.Since(start).Seconds()
	n := p.Updates() - updates
	b.ReportMetric(float64(n)/secs, "updates/s")
	b.ReportMetric(float64(b.N*len(evs))/secs, "events/s")
}

// BenchmarkObserve measures what the audit pipeline pays per batch for the tap (ObserveAudit of a
// 100-event batch, handled by the processor's goroutine meanwhile).
func BenchmarkObserve(b *testing.B) {
	evs := benchEvents(b)[:100]
	p, err := New(Config{QueueSize: 1 << 20, Metrics: []MetricConfig{counter("m", tagUser)}}, newPromProvider(b).settings())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p.ObserveAudit("bench", evs)
	}
	b.StopTimer()
	if err := p.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
