package tap

import (
	"bufio"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/internal/fixture"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/telemetry"
)

// bulkWebhookBatches reads the recorded webhook batches of the bulk fixture.
func bulkWebhookBatches(b *testing.B) ([]webhook.AcceptedBatch, int, int64) {
	b.Helper()
	f, err := os.Open(fixture.Path(b, "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(b, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(b, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	var batches []webhook.AcceptedBatch
	events, size := 0, int64(0)
	for sc.Scan() {
		body := append([]byte(nil), sc.Bytes()...)
		evs, err := auditv1.DecodeEventList(body)
		require.NoError(b, err)
		batches = append(batches, webhook.AcceptedBatch{Cluster: "c1", Body: body, Events: len(evs)})
		events += len(evs)
		size += int64(len(body))
	}
	require.NoError(b, sc.Err())
	return batches, events, size
}

// BenchmarkDumpWrite: the dump's writer on the bulk fixture (split into items, compacted,
// written with rotation), in events per second of one core.
func BenchmarkDumpWrite(b *testing.B) {
	batches, events, size := bulkWebhookBatches(b)
	d, err := NewDumper(DumpConfig{Path: filepath.Join(b.TempDir(), "dump.jsonl"), MaxBytes: 16 << 20, MaxFiles: 2}, telemetry.Settings{})
	require.NoError(b, err)
	require.NoError(b, d.open())
	b.SetBytes(size)
	cpu0 := benchCPU(b)
	b.ResetTimer()
	for range b.N {
		for _, bt := range batches {
			d.write(bt)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events*b.N)/(benchCPU(b)-cpu0).Seconds(), "events/cpu-s")
	require.NoError(b, d.Stop(context.Background()))
}

// BenchmarkForwardBodyWithDrops: rebuilding a batch of the accepted items (one dropped), the
// forwarder's extra work when the webhook dropped items.
func BenchmarkForwardBodyWithDrops(b *testing.B) {
	batches, events, size := bulkWebhookBatches(b)
	for i := range batches {
		batches[i].Dropped = []int{0}
		batches[i].Events--
	}
	b.SetBytes(size)
	cpu0 := benchCPU(b)
	b.ResetTimer()
	for range b.N {
		for _, bt := range batches {
			if _, err := forwardBody(bt); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(events*b.N)/(benchCPU(b)-cpu0).Seconds(), "events/cpu-s")
}

// benchCPU is the CPU time the process used so far (user and system).
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
