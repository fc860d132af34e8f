package kelemetry_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// stampSink notes when each audit event's span reached the sinks, by audit ID.
type stampSink struct {
	mu     sync.Mutex
	stored map[string]time.Time
}

func (s *stampSink) Export(_ context.Context, spans []*aggregator.Span) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range spans {
		if sp.Kind != aggregator.KindEvent {
			continue
		}
		if id, ok := sp.Attributes.Get("kelemetry.audit.id"); ok {
			if _, seen := s.stored[id]; !seen {
				s.stored[id] = now
			}
		}
	}
	return nil
}

func (s *stampSink) at(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.stored[id]
	return t, ok
}

// natsPipeline is webhook -> NATSQueue (embedded JetStream on loopback) -> consumer ->
// aggregator (built-in linkers) -> memory store, as the all-in-one wires it with
// audit.queue.nats.
func newNATSBenchPipeline(b *testing.B, st aggregator.Sink) (http.Handler, queue.Queue, *stampSink) {
	return newGatedNATSBenchPipeline(b, st, nil)
}

// newGatedNATSBenchPipeline is newNATSBenchPipeline whose consumer waits, before each event,
// for the channel gate holds (when gate is not nil) to be closed.
func newGatedNATSBenchPipeline(b *testing.B, st aggregator.Sink, gate *atomic.Pointer[chan struct{}]) (http.Handler, queue.Queue, *stampSink) {
	b.Helper()
	ctx := context.Background()
	js := natstest.StartJetStream(b)
	stamps := &stampSink{stored: map[string]time.Time{}}
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{
		Sinks: []aggregator.Sink{st, stamps},
		Linkers: []aggregator.Linker{
			linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
			linker.NewAnnotationLinker(nil, telemetry.Settings{}),
		},
	})
	require.NoError(b, err)
	require.NoError(b, engine.Start(ctx))
	consumer, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: engine})
	require.NoError(b, err)
	cfg := fastNATS(js.URL())
	cfg.Partitions = 16
	cfg.MaxInFlight = 256
	handle := consumer.Handle
	if gate != nil {
		handle = func(ctx context.Context, cluster string, ev *auditv1.Event) {
			select {
			case <-*gate.Load():
			case <-ctx.Done():
				return
			}
			consumer.Handle(ctx, cluster, ev)
		}
	}
	q, err := queue.New(queue.Config{NATS: cfg}, queue.Deps{Handle: handle, Sync: engine.SyncSinks})
	require.NoError(b, err)
	require.NoError(b, q.Start(ctx))
	mux := http.NewServeMux()
	webhook.New(webhook.Config{RepeatWindow: -1}, webhook.Deps{Queue: q}).Register(mux) // measure the queue, not the repeat check
	b.Cleanup(func() {
		_ = q.Stop(ctx)
		_ = engine.Stop(ctx)
	})
	return mux, q, stamps
}

func postOK(b *testing.B, h http.Handler, batch []byte) {
	req := httptest.NewRequest(http.MethodPost, "/audit/bench", bytes.NewReader(batch))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("webhook answered %d: %s", rec.Code, rec.Body.String())
	}
}

// BenchmarkEndToEndNATS: webhook -> JetStream -> consumer -> in-memory store, bulk fixture, the
// batches posted by 4 concurrent senders (kube-apiserver's webhook sends one batch at a time per
// apiserver); events/s of the whole loop and per CPU-second of this process (which here also
// runs nats-server).
func BenchmarkEndToEndNATS(b *testing.B) {
	benchmarkEndToEndNATS(b, memory.New(memory.Config{}, 0))
}

// BenchmarkEndToEndNATSPebble: the same into the embedded Pebble store, whose write-ahead log is
// synced before messages are acknowledged (one sync shared by the partitions handling at once).
func BenchmarkEndToEndNATSPebble(b *testing.B) {
	st, err := pebble.Open(context.Background(), pebble.Config{Dir: b.TempDir()}, 0, telemetry.Settings{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Stop(context.Background()) })
	benchmarkEndToEndNATS(b, st)
}

func benchmarkEndToEndNATS(b *testing.B, st aggregator.Sink) {
	batches, events := bulkBatches(b)
	h, q, _ := newNATSBenchPipeline(b, st)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU(b)
	var posting time.Duration // until the last batch was answered 200
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		postAll(b, h, batches)
		posting += time.Since(start)
		require.NoError(b, q.Flush(ctx))
	}
	b.StopTimer()
	total := float64(events) * float64(b.N)
	perSec := total / b.Elapsed().Seconds()
	cores := float64(runtime.GOMAXPROCS(0))
	// Webhook side: events answered 200 (in JetStream) per second; consumer side: events
	// stored and acknowledged per second (the whole loop, which ends with the consumer).
	b.ReportMetric(total/posting.Seconds()/cores, "webhook-events/s/core")
	b.ReportMetric(perSec, "events/s")
	b.ReportMetric(perSec/cores, "events/s/core")
	b.ReportMetric(total/(processCPU(b)-cpu0).Seconds(), "events/cpu-s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNATSSides measures the two sides of BenchmarkEndToEndNATS apart: first the webhook
// side alone (the batches posted by 4 senders into JetStream while the consumer is held), then
// the consumer side alone (the held consumer released: JetStream -> consumer -> aggregator ->
// memory store, acknowledged). events/s per core and events per CPU-second of each phase.
func BenchmarkNATSSides(b *testing.B) {
	batches, events := bulkBatches(b)
	var gate atomic.Pointer[chan struct{}]
	held := make(chan struct{})
	gate.Store(&held)
	h, q, _ := newGatedNATSBenchPipeline(b, memory.New(memory.Config{}, 0), &gate)
	b.Cleanup(func() {
		if g := *gate.Load(); g != nil {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	})
	ctx := context.Background()
	var webhookWall, consumerWall, webhookCPU, consumerCPU time.Duration
	b.ResetTimer()
	for range b.N {
		g := make(chan struct{})
		gate.Store(&g)
		start, cpu0 := time.Now(), processCPU(b)
		postAll(b, h, batches)
		mid, cpu1 := time.Now(), processCPU(b)
		close(g)
		require.NoError(b, q.Flush(ctx))
		webhookWall += mid.Sub(start)
		consumerWall += time.Since(mid)
		webhookCPU += cpu1 - cpu0
		consumerCPU += processCPU(b) - cpu1
	}
	b.StopTimer()
	total := float64(events) * float64(b.N)
	cores := float64(runtime.GOMAXPROCS(0))
	b.ReportMetric(total/webhookWall.Seconds()/cores, "webhook-events/s/core")
	b.ReportMetric(total/webhookCPU.Seconds(), "webhook-events/cpu-s")
	b.ReportMetric(total/consumerWall.Seconds()/cores, "consumer-events/s/core")
	b.ReportMetric(total/consumerCPU.Seconds(), "consumer-events/cpu-s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkNATSLatency: the bulk fixture's batches posted one at a time at a steady pace (one
// batch, about 40 events, every 100ms: well below the throughput above): the time from the start of the webhook request to the
// event's span reaching the sinks, p50 and p99 over the events.
func BenchmarkNATSLatency(b *testing.B) {
	batches, _ := bulkBatches(b)
	if len(batches) > 50 {
		batches = batches[:50]
	}
	h, q, stamps := newNATSBenchPipeline(b, memory.New(memory.Config{}, 0))
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		posted := map[string]time.Time{}
		tick := time.NewTicker(100 * time.Millisecond)
		for _, batch := range batches {
			<-tick.C
			evs, err := auditv1.DecodeEventList(batch)
			require.NoError(b, err)
			start := time.Now()
			postOK(b, h, batch)
			for _, ev := range evs {
				if _, ok := posted[ev.AuditID]; !ok {
					posted[ev.AuditID] = start
				}
			}
		}
		tick.Stop()
		require.NoError(b, q.Flush(ctx))
		for id, start := range posted {
			if at, ok := stamps.at(id); ok && at.After(start) {
				lat = append(lat, at.Sub(start))
			}
		}
		// The next round posts the same events: a fresh record.
		stamps.mu.Lock()
		stamps.stored = map[string]time.Time{}
		stamps.mu.Unlock()
	}
	b.StopTimer()
	require.NotEmpty(b, lat, "no event reached the sinks")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lat))/float64(b.N), "events/round")
	b.ReportMetric(0, "ns/op")
}

// postAll posts batches to h with 4 concurrent posters and returns when every one was answered
// 200.
func postAll(b *testing.B, h http.Handler, batches [][]byte) {
	var wg sync.WaitGroup
	next := make(chan []byte)
	for range 4 {
		wg.Go(func() {
			for batch := range next {
				postOK(b, h, batch)
			}
		})
	}
	for _, batch := range batches {
		next <- batch
	}
	close(next)
	wg.Wait()
}
