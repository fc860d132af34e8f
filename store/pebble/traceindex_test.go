package pebble

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// traceIndexWindows returns the windows of the stored trace index entries, by trace ID.
func traceIndexWindows(t *testing.T, p *Store) map[trace.TraceID][]int64 {
	t.Helper()
	out := map[trace.TraceID][]int64{}
	require.NoError(t, p.scan(context.Background(), []byte{prefixTrace}, []byte{prefixTrace + 1}, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		require.Len(t, k, traceKeyLen)
		var tid trace.TraceID
		copy(tid[:], k[1:])
		out[tid] = append(out[tid], readWindow(k[1+traceIDLen:]))
		return true, nil
	}))
	return out
}

// A store of schema version 3 keeps the trace index entries of the windows it holds (late
// writes into them add more) and from the window after its newest on writes them only for trace
// IDs that do not say their window (of another origin, or of another window); every trace is
// found by its ID and by its ID's leading bytes whichever window it is in, within a time range or
// not; retention deletes the entries of the windows it deletes.
func TestTraceIndexOnlyBeforeTheWindowAfterAnUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const win = 30 * time.Minute
	now := time.Now().UTC()
	past := now.Truncate(win).Add(-2 * win)
	future := now.Truncate(win).Add(3 * win) // within the store's maxFutureSkew
	next := future.Add(win)
	obj := aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "ns", Name: "p"}
	// A trace ID of another origin (not made by TraceIDFor): its window is its spans' start's.
	foreign := func(w time.Time, id byte) *aggregator.Span {
		return &aggregator.Span{TraceID: trace.TraceID{0xee, 1, 2, 3}, SpanID: trace.SpanID{id}, Kind: aggregator.KindEvent,
			Source: "otlp", Name: "y", Object: obj, Start: w.Add(time.Minute), End: w.Add(2 * time.Minute)}
	}
	tPast := aggregator.TraceIDFor(obj.Key(), past)
	tFuture := aggregator.TraceIDFor(obj.Key(), future)
	tNext := aggregator.TraceIDFor(obj.Key(), next)
	tForeign := trace.TraceID{0xee, 1, 2, 3}

	p := openTestPebble(t, Config{Dir: dir}, nil)
	asBeforeLayout(t, p, schemaVersionV3, traceIndexToKey, &p.traceIdxTo) // trace index entries in every window
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(obj, past, aggregator.KindEvent, 1, time.Minute, "create"),
		segSpan(obj, future, aggregator.KindEvent, 2, time.Minute, "update"),
		foreign(past, 3),
	}))
	require.NoError(t, p.close())

	p = openTestPebble(t, Config{Dir: dir}, nil)
	v, closer, err := p.db.Get(versionKey)
	require.NoError(t, err)
	assert.Equal(t, schemaVersion, string(v))
	require.NoError(t, closer.Close())
	assert.Equal(t, next.UnixNano(), p.traceIdxTo.Load(), "after the newest window stored")
	assert.True(t, p.traceIndexed(future.UnixNano(), tFuture))
	assert.False(t, p.traceIndexed(next.UnixNano(), tNext))
	assert.True(t, p.traceIndexed(next.UnixNano(), tForeign))
	assert.True(t, p.traceIndexed(next.Add(win).UnixNano(), tNext))

	// Late writes to an old window add entries; a new window has none but for trace IDs that do
	// not say it: of another origin, or of another window (a span of tNext stored by its start,
	// in the window after).
	later := segSpan(obj, next, aggregator.KindEvent, 7, win+time.Minute, "patch")
	later.Window = time.Time{}
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(obj, past, aggregator.KindEvent, 4, 20*time.Minute, "patch"),
		segSpan(obj, next, aggregator.KindEvent, 5, 20*time.Minute, "delete"),
		foreign(next, 6),
		later,
	}))
	require.NoError(t, p.Sync(ctx))
	assert.Equal(t, map[trace.TraceID][]int64{
		tPast:    {past.UnixNano()},
		tFuture:  {future.UnixNano()},
		tNext:    {next.Add(win).UnixNano()},
		tForeign: {past.UnixNano(), next.UnixNano()},
	}, traceIndexWindows(t, p))

	check := func(stage string) {
		t.Helper()
		for tid, want := range map[trace.TraceID][]byte{tPast: {1, 4}, tFuture: {2}, tNext: {5, 7}, tForeign: {3, 6}} {
			spans, err := p.GetTrace(ctx, tid)
			require.NoError(t, err, "%s: %s", stage, tid)
			var got []byte
			for _, sp := range spans {
				got = append(got, sp.SpanID[0])
			}
			assert.ElementsMatch(t, want, got, "%s: trace %s", stage, tid)
		}
		_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), next.Add(2*win)))
		require.ErrorIs(t, err, query.ErrNotFound, stage)

		windows := func(q query.TraceQuery) []time.Time {
			t.Helper()
			refs, err := p.FindTraces(ctx, q)
			require.NoError(t, err, stage)
			var out []time.Time
			for _, r := range refs {
				out = append(out, r.Window)
			}
			return out
		}
		assert.Equal(t, []time.Time{past, future, next, next.Add(win)}, windows(query.TraceQuery{IDPrefix: tPast[:8]}), "%s: the object's traces", stage)
		assert.Equal(t, []time.Time{past, next}, windows(query.TraceQuery{IDPrefix: tForeign[:4]}), "%s: the foreign trace", stage)
		assert.Equal(t, []time.Time{future, next}, windows(query.TraceQuery{IDPrefix: tPast[:8], From: future.Add(time.Minute), To: next}), stage)
		assert.Equal(t, []time.Time{next, next.Add(win)}, windows(query.TraceQuery{IDPrefix: tNext[:], From: past}), stage)
		assert.Empty(t, windows(query.TraceQuery{IDPrefix: tPast[:8], From: next.Add(2 * win)}), stage)
		assert.Equal(t, []time.Time{past}, windows(query.TraceQuery{IDPrefix: tPast[:8], To: past.Add(win - 1)}), stage)
	}
	check("upgraded")
	require.NoError(t, p.close())

	// Reopened, the first window without trace index entries is the one recorded.
	p = openTestPebble(t, Config{Dir: dir}, nil)
	assert.Equal(t, next.UnixNano(), p.traceIdxTo.Load())
	check("reopened")

	// Retention deletes the entries of the windows it deletes.
	require.NoError(t, p.retainAge(ctx, future.UnixNano(), futureLimit(now, time.Hour*3)))
	assert.Equal(t, map[trace.TraceID][]int64{tFuture: {future.UnixNano()}, tNext: {next.Add(win).UnixNano()}, tForeign: {next.UnixNano()}}, traceIndexWindows(t, p))
	_, err = p.GetTrace(ctx, tPast)
	require.ErrorIs(t, err, query.ErrNotFound)
	spans, err := p.GetTrace(ctx, tForeign)
	require.NoError(t, err)
	require.Len(t, spans, 1)
	assert.Equal(t, byte(6), spans[0].SpanID[0])
}

// A new store writes no trace index entries.
func TestNoTraceIndexInANewStore(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	assert.Equal(t, int64(math.MinInt64), p.traceIdxTo.Load())
	w := time.Now().UTC().Truncate(30 * time.Minute)
	obj := aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "ns", Name: "p"}
	require.NoError(t, p.Export(ctx, []*aggregator.Span{segSpan(obj, w, aggregator.KindEvent, 1, time.Minute, "create")}))
	require.NoError(t, p.Sync(ctx))
	assert.Empty(t, traceIndexWindows(t, p))
	spans, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
	require.NoError(t, err)
	assert.Len(t, spans, 1)
}
