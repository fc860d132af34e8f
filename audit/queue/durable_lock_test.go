package queue

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/telemetry"
)

// within fails the test unless fn returns within a generous bound (it stands for "does not wait
// for the blocked file operation", which would block it for good), or returns an error.
func within(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		require.NoError(t, err, what)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for a blocked file operation", what)
	}
}

// Deleting handled segments happens after the log's lock is let go: a slow deletion (a large
// file on a busy disk) delays the acknowledging goroutine, not the webhook's writes.
func TestDiskLogDeletesOutsideTheLock(t *testing.T) {
	dir := t.TempDir()
	l, ids, segs, full := severalSegments(t, dir)

	started, release := make(chan string, segs+1), make(chan struct{})
	l.mu.Lock()
	l.remove = func(path string) error {
		started <- path
		<-release
		return os.Remove(path)
	}
	l.mu.Unlock()
	var acked sync.WaitGroup
	acked.Go(func() { l.Ack(ids...) })
	<-started // the first deletion has begun, and blocks

	within(t, "an append while a handled segment is deleted", func() error {
		_, err := l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "meanwhile", "id-meanwhile")}))
		return err
	})
	var size int64
	within(t, "the log's size while a handled segment is deleted", func() error { size = l.Size(); return nil })
	assert.Greater(t, size, full, "the files not deleted yet still count")
	close(release)
	acked.Wait()
	assert.Len(t, segFiles(t, dir), 1, "handled segments are deleted, the active one stays")
	assert.Equal(t, int64(segs), l.deletedSegs.Load())
	assert.Less(t, l.Size(), full/4)
	require.NoError(t, l.Close())

	l2, pending := openTestLog(t, dir, 1<<20, 512)
	assert.Equal(t, []string{"meanwhile"}, replayedNames(t, pending))
	require.NoError(t, l2.Close())
}

// blockingSeg is a segment file whose Sync waits while block is open, and counts its syncs.
type blockingSeg struct {
	f       dataSyncFile
	syncing chan<- struct{}
	block   <-chan struct{}
	syncs   *syncCounts
}

type syncCounts struct {
	mu     sync.Mutex
	byPath map[string]int
}

func (s blockingSeg) Write(p []byte) (int, error) { return s.f.Write(p) }
func (s blockingSeg) Close() error                { return s.f.Close() }
func (s blockingSeg) Sync() error {
	select {
	case s.syncing <- struct{}{}:
	default:
	}
	<-s.block
	s.syncs.mu.Lock()
	s.syncs.byPath[s.f.Name()]++
	s.syncs.mu.Unlock()
	return s.f.Sync()
}

// Starting a new segment does not sync the one before it under the lock: while one batch's fsync
// is slow, other batches are still written and rotate segments, and each batch is on disk (and
// replayed after a crash) once its own sync returns.
func TestDiskLogRotatesWithoutWaitingForAnFsync(t *testing.T) {
	dir := t.TempDir()
	l, _ := openTestLog(t, dir, 1<<20, 512)
	syncing, block := make(chan struct{}, 1), make(chan struct{})
	counts := &syncCounts{byPath: map[string]int{}}
	l.mu.Lock()
	l.create = func(path string) (segFile, error) {
		f, err := createSegFile(path)
		if err != nil {
			return nil, err
		}
		return blockingSeg{f: f.(dataSyncFile), syncing: syncing, block: block, syncs: counts}, nil
	}
	require.NoError(t, l.newSegment(l.active().num+1))
	l.mu.Unlock()

	var first sync.WaitGroup
	first.Go(func() { appendTestBatch(t, l, "first") })
	<-syncing // its fsync has begun, and blocks

	type written struct {
		seg *logSegment
		end int64
	}
	var ws []written
	within(t, "writes that rotate segments during an fsync", func() error {
		for i := range 20 {
			rec := appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", strconv.Itoa(i), "id-"+strconv.Itoa(i))})
			_, seg, end, err := l.write(rec)
			if err != nil {
				return err
			}
			ws = append(ws, written{seg, end})
		}
		return nil
	})
	l.mu.Lock()
	require.Greater(t, len(l.segs), 4, "the writes rotated segments")
	l.mu.Unlock()
	close(block)
	first.Wait()
	for _, w := range ws {
		require.NoError(t, l.syncTo(w.seg, w.end))
	}
	// Each batch's segment was synced by a batch in it (the rotation synced none).
	counts.mu.Lock()
	for _, w := range ws {
		assert.Positive(t, counts.byPath[w.seg.path], "segment %s holds a batch and was never synced", w.seg.path)
	}
	counts.mu.Unlock()
	crash(l)

	l2, pending := openTestLog(t, dir, 1<<20, 512)
	want := []string{"first"}
	for i := range 20 {
		want = append(want, strconv.Itoa(i))
	}
	assert.Equal(t, want, replayedNames(t, pending))
	require.NoError(t, l2.Close())
}

// Every fsync of accepted batches is timed: the histogram counts as many as the fsyncs gauge.
func TestDurableQueueTimesItsFsyncs(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	ctx := context.Background()
	d := newTestDurable(t, Config{Dir: t.TempDir()}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}, Telemetry: ts})
	require.NoError(t, d.Start(ctx))
	for i := range 5 {
		require.NoError(t, d.EnqueueWait(ctx, "c", []*auditv1.Event{queueEvent("ns", strconv.Itoa(i), "id-"+strconv.Itoa(i))}))
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	var count uint64
	var sum float64
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "kelemetry.audit.queue.fsync.duration" {
				found = true
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					count += dp.Count
					sum += dp.Sum
				}
			}
		}
	}
	require.True(t, found, "no fsync histogram")
	assert.Equal(t, uint64(d.log.syncs.Load()), count)
	assert.GreaterOrEqual(t, count, uint64(5), "each batch waited for an fsync (one at a time here)")
	assert.Positive(t, sum)
}

// A failed fsync of a segment that is no longer the active one gives it up: a batch written to it
// before the failure is not acknowledged by a later fsync of the same file that succeeds (the
// kernel reports a writeback error once), even after a probe brought the log back.
func TestDiskLogFailedSyncOfAnOlderSegment(t *testing.T) {
	l, _, failSyncs := faultyLog(t, t.TempDir(), 512)

	write := func(name string) (*logSegment, int64) {
		t.Helper()
		_, seg, end, err := l.write(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", name, "id-"+name)}))
		require.NoError(t, err)
		return seg, end
	}
	segA, endA := write("a")
	segC, endC := write("c") // written, its sync still to come
	require.Same(t, segA, segC)
	var segB *logSegment
	for i := 0; segB == nil || segB == segA; i++ { // until a write rotates to a new segment
		require.Less(t, i, 50)
		segB, _ = write("b" + strconv.Itoa(i))
	}
	failSyncs.Store(true)
	require.ErrorIs(t, l.syncTo(segA, endA), ErrUnavailable)
	failSyncs.Store(false)
	probeNow(l)
	require.NoError(t, l.Health(), "a probe brings the log back")
	require.ErrorIs(t, l.syncTo(segC, endC), ErrUnavailable, "the batch in the segment whose sync failed is never acknowledged")
	require.NoError(t, l.Close())
}
