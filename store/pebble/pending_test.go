package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

func pendingLen(p *Store) int {
	p.pending.mu.Lock()
	defer p.pending.mu.Unlock()
	return len(p.pending.spans)
}

// storedSpans counts the span entries in the database itself, past the pending spans and the
// reads that commit them.
func storedSpans(t *testing.T, p *Store) int {
	t.Helper()
	n := 0
	it, err := p.db.NewIter(nil)
	require.NoError(t, err)
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) > 0 && k[0] == prefixSpan {
			n++
		}
	}
	require.NoError(t, it.Close())
	return n
}

// Export leaves its spans pending; they are committed together when the next Export needs the
// room, by a read, by Sync, or pendingDelay later, and an Export larger than the room is
// committed at once (after the spans before it).
func TestPebblePendingSpansAreCommitted(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	p.pending.delay = time.Hour
	obj := ref("c", "", "pods", "ns", "p")
	tid := aggregator.TraceIDFor(obj.Key(), t0)

	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 2, 16)))
	assert.Equal(t, 3, pendingLen(p))
	assert.Zero(t, storedSpans(t, p), "not committed yet")
	got, err := p.GetTrace(ctx, tid)
	require.NoError(t, err)
	assert.Len(t, got, 3, "a read sees the spans Export returned for")
	assert.Zero(t, pendingLen(p))
	assert.Equal(t, 3, storedSpans(t, p))

	// 3 + 60 fit; the next one does not: the 63 before it are committed, it stays pending.
	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 10, 2, 16)))
	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 20, 60, 16)[1:]))
	assert.Equal(t, 63, pendingLen(p))
	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 100, 2, 16)[1:]))
	assert.Equal(t, 2, pendingLen(p))
	assert.Equal(t, 3+62, storedSpans(t, p))

	// More than the room: the pending ones, then it, at once.
	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 200, 100, 16)[1:]))
	assert.Zero(t, pendingLen(p))
	assert.Equal(t, 3+62+2+100, storedSpans(t, p))

	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 400, 5, 16)[1:]))
	require.NoError(t, p.Sync(ctx))
	assert.Zero(t, pendingLen(p), "Sync commits them")
	assert.Equal(t, 3+62+2+100+5, storedSpans(t, p))

	// The timer commits what nothing else did.
	p.pending.mu.Lock()
	p.pending.delay = 5 * time.Millisecond
	p.pending.mu.Unlock()
	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 500, 4, 16)[1:]))
	require.Eventually(t, func() bool { return pendingLen(p) == 0 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 3+62+2+100+5+4, storedSpans(t, p))
	got, err = p.GetTrace(ctx, tid)
	require.NoError(t, err)
	assert.Len(t, got, 3+62+2+100+5+4)
}

// Pending spans that cannot be committed (a full disk) stay pending: Sync reports it, so the
// durable queue does not mark their events handled, and they are committed once the disk has
// room again. close commits what is pending.
func TestPebblePendingSpansSurviveAFullDisk(t *testing.T) {
	ctx := context.Background()
	ffs := newFaultFS()
	dir := t.TempDir()
	p := openFaultPebble(t, Config{Dir: dir, MaxAge: time.Hour, MaxBytes: 64 << 20}, ffs)
	p.pending.delay = time.Hour
	obj := ref("c", "", "pods", "ns", "p")
	tid := aggregator.TraceIDFor(obj.Key(), t0)

	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 4, 1024)))
	ffs.full.Store(true)
	expireSpaceCheck(p)
	err := p.Export(ctx, windowSpans(obj, t0.Add(win), 1, 1024))
	require.ErrorIs(t, err, query.ErrUnavailable, "refused whole")
	require.ErrorIs(t, p.Sync(ctx), query.ErrUnavailable, "the pending spans could not be committed")
	assert.Equal(t, 5, pendingLen(p), "and stay pending")
	_, err = p.GetTrace(ctx, tid)
	require.ErrorIs(t, err, query.ErrNotFound, "reads go on without them")
	assert.Equal(t, 5, pendingLen(p))

	ffs.full.Store(false)
	withinTime(t, 10*time.Second, "recovery", func() { p.recoverStep(ctx) })
	require.NoError(t, p.Health(ctx), "healthy once the pending spans could be committed")
	require.NoError(t, p.Sync(ctx))
	assert.Zero(t, pendingLen(p))
	got, err := p.GetTrace(ctx, tid)
	require.NoError(t, err)
	assert.Len(t, got, 5)

	require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, 10, 3, 1024)[1:]))
	require.NoError(t, p.close())
	q := openTestPebble(t, Config{Dir: dir}, nil)
	got, err = q.GetTrace(ctx, tid)
	require.NoError(t, err)
	assert.Len(t, got, 8, "Close committed the pending spans")
}

// An Export larger than the room is committed at once and leaves the caller's slice alone (the
// aggregator hands the same slice to every sink); a nil span is refused before it could fail the
// commit of the spans around it.
func TestPebbleLargeExportKeepsTheCallersSlice(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	spans := windowSpans(obj, t0, 99, 16)
	orig := append([]*aggregator.Span(nil), spans...)
	require.NoError(t, p.Export(ctx, spans))
	assert.Equal(t, orig, spans, "the slice is the caller's")
	assert.Zero(t, pendingLen(p))
	assert.Equal(t, 100, storedSpans(t, p))

	require.Error(t, p.Export(ctx, []*aggregator.Span{orig[1], nil}))
	assert.Zero(t, pendingLen(p), "nothing of it taken")
}

// close reports the pending spans it could not commit (a store that failed meanwhile) instead of
// dropping them quietly.
func TestPebbleCloseReportsUncommittedSpans(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	p.pending.delay = time.Hour
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 2, 16)))
	msg := "injected fatal error"
	p.failed.Store(&msg)
	err := p.close()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3 pending spans not committed")
}
