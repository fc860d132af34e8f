package kelemetry_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// bulkBatches reads the recorded webhook batches of the bulk fixture (about 10,000 audit events
// from 20 Deployments of 10-25 replicas) and counts their events.
func bulkBatches(tb testing.TB) ([][]byte, int) {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(tb, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(tb, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	var batches [][]byte
	events := 0
	for sc.Scan() {
		b := append([]byte(nil), sc.Bytes()...)
		evs, err := auditv1.DecodeEventList(b)
		require.NoError(tb, err)
		events += len(evs)
		batches = append(batches, b)
	}
	require.NoError(tb, sc.Err())
	return batches, events
}

// pipeline is webhook -> queue -> consumer -> aggregator (with the built-in linkers) -> sink,
// wired as the all-in-one wires it, without HTTP sockets.
type pipeline struct {
	handler http.Handler
	queue   queue.Queue
	engine  *aggregator.Engine
}

func newPipeline(tb testing.TB, sink aggregator.Sink) *pipeline {
	tb.Helper()
	ctx := context.Background()
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{
		Sinks: []aggregator.Sink{sink},
		Linkers: []aggregator.Linker{
			linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
			linker.NewAnnotationLinker(nil, telemetry.Settings{}),
		},
	})
	require.NoError(tb, err)
	require.NoError(tb, engine.Start(ctx))
	// The benchmarks post the same fixture b.N times: without DedupSize -1 (and the webhook's
	// RepeatWindow -1 below) the consumer (and the webhook) would drop every pass after the first
	// as repeated deliveries and the figure would measure that.
	consumer, err := consumer.New(consumer.Config{DedupSize: -1}, consumer.Deps{Aggregator: engine})
	require.NoError(tb, err)
	q, err := queue.New(queue.Config{}, queue.Deps{Handle: consumer.Handle})
	require.NoError(tb, err)
	require.NoError(tb, q.Start(ctx))
	mux := http.NewServeMux()
	webhook.New(webhook.Config{RepeatWindow: -1}, webhook.Deps{Queue: q}).Register(mux)
	p := &pipeline{handler: mux, queue: q, engine: engine}
	tb.Cleanup(func() {
		_ = q.Stop(ctx)
		_ = engine.Stop(ctx)
	})
	return p
}

func (p *pipeline) post(tb testing.TB, batch []byte) {
	req := httptest.NewRequest(http.MethodPost, "/audit/bench", bytes.NewReader(batch))
	rec := httptest.NewRecorder()
	p.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("webhook answered %d: %s", rec.Code, rec.Body.String())
	}
}

func benchmarkEndToEnd(b *testing.B, sink aggregator.Sink) {
	batches, events := bulkBatches(b)
	p := newPipeline(b, sink)
	ctx := context.Background()
	var size int64
	for _, batch := range batches {
		size += int64(len(batch))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range b.N {
		for _, batch := range batches {
			p.post(b, batch)
		}
		require.NoError(b, p.queue.Flush(ctx))
	}
	b.StopTimer()
	total := float64(events) * float64(b.N)
	perSec := total / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "events/s")
	b.ReportMetric(perSec/float64(runtime.GOMAXPROCS(0)), "events/s/core")
	// Events per second of this process's CPU time (user + system, all threads, store
	// background work included): steadier than wall time on a shared machine.
	b.ReportMetric(total/(processCPU(b)-cpu0).Seconds(), "events/cpu-s")
	b.ReportMetric(0, "ns/op")
}

func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEndToEndMemory: webhook -> queue -> aggregator -> in-memory store, bulk fixture.
func BenchmarkEndToEndMemory(b *testing.B) {
	benchmarkEndToEnd(b, memory.New(memory.Config{}, 0))
}

// BenchmarkEndToEndPebble: the same into the embedded Pebble store.
func BenchmarkEndToEndPebble(b *testing.B) {
	st, err := pebble.Open(context.Background(), pebble.Config{Dir: b.TempDir()}, 0, telemetry.Settings{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Stop(context.Background()) })
	benchmarkEndToEnd(b, st)
}
