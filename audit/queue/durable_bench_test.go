package queue

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/fixture"
)

func bulkEventBatches(b *testing.B) [][]*auditv1.Event {
	b.Helper()
	f, err := os.Open(fixture.Path(b, "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(b, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(b, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out [][]*auditv1.Event
	for sc.Scan() {
		evs, err := auditv1.DecodeEventList(bytes.Clone(sc.Bytes()))
		require.NoError(b, err)
		out = append(out, evs)
	}
	return out
}

// BenchmarkDurableQueueEnqueue measures what the durable queue adds per batch of the bulk
// fixture: encoding, writing and an fsync (batches enqueued one at a time, so none share one),
// with a handler that does nothing.
func BenchmarkDurableQueueEnqueue(b *testing.B) {
	batches := bulkEventBatches(b)
	d, err := newDurable(Config{Dir: b.TempDir()}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.NoError(b, err)
	ctx := context.Background()
	require.NoError(b, d.Start(ctx))
	require.NoError(b, d.EnqueueWait(ctx, "c", nil))
	events := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		evs := batches[i%len(batches)]
		events += len(evs)
		require.NoError(b, d.EnqueueWait(ctx, "c", evs))
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	require.NoError(b, d.Stop(ctx))
}
