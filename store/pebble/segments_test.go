package pebble

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// asBeforeSegments makes p, a store just opened, write without segments as a store of an
// earlier Kelemetry did (schema version 2, no segFromKey).
func asBeforeSegments(t *testing.T, p *Store) {
	t.Helper()
	asBeforeLayout(t, p, schemaVersionV2, segFromKey, &p.segFrom)
}

// asBeforeLayout makes p, a store just opened, a store of schema version version that does not
// know the layout whose first window key records and from holds: it writes every window as
// before that layout.
func asBeforeLayout(t *testing.T, p *Store, version string, key []byte, from *atomic.Int64) {
	t.Helper()
	require.NoError(t, p.db.Delete(key, nil))
	require.NoError(t, p.db.Set(versionKey, []byte(version), nil))
	from.Store(math.MaxInt64)
}

// segSpan is a span of obj's trace in window w, started at w+at.
func segSpan(obj aggregator.ObjectRef, w time.Time, kind aggregator.SpanKind, id byte, at time.Duration, verb string) *aggregator.Span {
	sp := &aggregator.Span{
		TraceID: aggregator.TraceIDFor(obj.Key(), w), SpanID: trace.SpanID{id}, Kind: kind, Source: "audit",
		Name: "x", Object: obj, Window: w, Start: w.Add(at), End: w.Add(at + time.Second),
	}
	if kind == aggregator.KindEvent {
		sp.Attributes = aggregator.Attrs{{Key: aggregator.AttrVerb, Value: verb}}
	}
	if kind == aggregator.KindLink {
		sp.Link = &aggregator.Link{Target: aggregator.ObjectRef{Cluster: "c", Resource: "nodes", Name: "n"}, Role: aggregator.RoleParent}
	}
	return sp
}

// spanKeySegments returns the segment byte of every stored span key, by span ID.
func spanKeySegments(t *testing.T, p *Store) map[byte]int {
	t.Helper()
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSpan}, UpperBound: []byte{prefixSpan + 1}})
	require.NoError(t, err)
	defer it.Close()
	out := map[byte]int{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		require.Len(t, k, spanKeyLen+1, "a key with its segment")
		out[k[len(k)-spanIDLen]] = int(k[1+windowLen])
	}
	return out
}

// storeClock makes p's clock read at, until at changes.
func storeClock(p *Store, at time.Time) *atomic.Int64 {
	var clock atomic.Int64
	clock.Store(at.UnixNano())
	p.now = func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	return &clock
}

// A window's span keys are grouped by the sixth of the window their span started in, or for
// object and link spans the sixth they were written in; the object index records which sixths
// hold the trace's spans, also when the index cache forgot the trace, without losing the object
// reference of its object span; and every read finds the spans of every segment.
func TestSegmentsGroupSpanKeys(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	w := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	clock := storeClock(p, w.Add(time.Minute))
	obj := aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web", UID: "u1"}
	bare := obj
	bare.Version, bare.UID = "", "" // what an event of a deletion, say, carries
	spans := []*aggregator.Span{
		segSpan(obj, w, aggregator.KindObject, 1, 0, ""),
		segSpan(bare, w, aggregator.KindEvent, 2, time.Minute, "create"),
		segSpan(bare, w, aggregator.KindEvent, 3, 12*time.Minute, "update"),
		segSpan(bare, w, aggregator.KindLink, 4, 20*time.Minute, ""),
		segSpan(bare, w, aggregator.KindEvent, 5, 29*time.Minute, "delete"),
	}
	require.NoError(t, p.Export(ctx, spans[:3]))
	require.NoError(t, p.Sync(ctx))                 // pending spans are written (and placed) when committed
	clock.Store(w.Add(29 * time.Minute).UnixNano()) // the link is written with the last event
	require.NoError(t, p.Export(ctx, spans[3:]))
	require.NoError(t, p.Sync(ctx))
	// Written after the window (a replay, say), object and link spans go with their start.
	late := w.Add(-time.Hour)
	lateObj := obj
	lateObj.Name = "late"
	clock.Store(w.Add(time.Hour).UnixNano())
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(lateObj, late, aggregator.KindObject, 11, 0, ""),
		segSpan(lateObj, late, aggregator.KindLink, 12, 20*time.Minute, ""),
	}))
	require.NoError(t, p.Sync(ctx))
	clock.Store(w.Add(29 * time.Minute).UnixNano())
	assert.Equal(t, map[byte]int{1: 0, 2: 0, 3: 2, 4: 5, 5: 5, 11: 0, 12: 4}, spanKeySegments(t, p))

	found := func() query.ObjectWindows {
		t.Helper()
		res, err := p.FindObjects(ctx, query.ObjectQuery{Resource: "deployments", Name: "web"})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.Len(t, res[0].Windows, 1)
		return res[0]
	}
	ow := found()
	assert.Equal(t, uint8(0b100101), ow.Windows[0].Segments)
	assert.Equal(t, obj, ow.Object, "the object span's reference")
	ids := func(spans []*aggregator.Span) []byte {
		var out []byte
		for _, sp := range spans {
			out = append(out, sp.SpanID[0])
		}
		return out
	}
	read := func(segs uint8) []byte {
		t.Helper()
		ws := ow.Windows[0]
		ws.Segments = segs
		got, err := p.GetTraces(ctx, []query.ObjectWindow{ws})
		require.NoError(t, err)
		return ids(got[0])
	}
	assert.Equal(t, []byte{1, 2, 3, 4, 5}, read(ow.Windows[0].Segments), "the segments of the mask, one list in span order")
	assert.Equal(t, []byte{1, 2, 3, 4, 5}, read(0), "no mask: every segment")
	assert.Equal(t, []byte{3}, read(0b100), "the mask is what is read")

	// A new segment of a trace the cache forgot: the mask grows, the reference stays.
	p.index.Purge()
	require.NoError(t, p.Export(ctx, []*aggregator.Span{segSpan(bare, w, aggregator.KindEvent, 6, 16*time.Minute, "patch")}))
	require.NoError(t, p.Sync(ctx))
	ow = found()
	assert.Equal(t, uint8(0b101101), ow.Windows[0].Segments)
	assert.Equal(t, obj, ow.Object)
	// And one the cache knows, in a batch of its own.
	require.NoError(t, p.Export(ctx, []*aggregator.Span{segSpan(bare, w, aggregator.KindEvent, 7, 6*time.Minute, "patch")}))
	require.NoError(t, p.Sync(ctx))
	ow = found()
	assert.Equal(t, uint8(0b101111), ow.Windows[0].Segments)
	assert.Equal(t, obj, ow.Object)

	all, err := p.GetTrace(ctx, spans[0].TraceID)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 7, 3, 6, 4, 5}, ids(all))

	// The event filter of a search reads the segments too.
	res, err := p.FindObjects(ctx, query.ObjectQuery{Resource: "deployments", Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "delete"}}})
	require.NoError(t, err)
	require.Len(t, res, 1)
}

// An object or link span written again later in its window (by a later process, or once the
// engine forgot it) has a key in the segment of that write as well: every read returns one
// version of it, the newer (the later written when they tie), as a Jaeger backend's reads do.
func TestSegmentsKeepOneVersionOfARepeatedSpan(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	w := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	clock := storeClock(p, w.Add(time.Minute))
	first := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p", UID: "u1"}
	again := first
	again.UID = "u2" // the same key, another version of the object
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(first, w, aggregator.KindObject, 1, 0, ""),
		segSpan(first, w, aggregator.KindEvent, 2, time.Minute, "create"),
		segSpan(first, w, aggregator.KindLink, 3, time.Minute, ""),
	}))
	require.NoError(t, p.Sync(ctx))
	clock.Store(w.Add(16 * time.Minute).UnixNano())
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(again, w, aggregator.KindObject, 1, 0, ""),
		segSpan(again, w, aggregator.KindLink, 3, 16*time.Minute, ""), // linked again, later
		segSpan(again, w, aggregator.KindEvent, 4, 16*time.Minute, "update"),
	}))
	require.NoError(t, p.Sync(ctx))

	keys := 0
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSpan}, UpperBound: []byte{prefixSpan + 1}})
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		keys++
	}
	require.NoError(t, it.Close())
	assert.Equal(t, 6, keys, "both versions are stored, in segments 0 and 3")

	check := func(what string, spans []*aggregator.Span) {
		t.Helper()
		var got []string
		for _, sp := range spans {
			got = append(got, fmt.Sprintf("%d %s %s", sp.SpanID[0], sp.Object.UID, sp.Start.Sub(w)))
		}
		assert.Equal(t, []string{"1 u2 0s", "2 u1 1m0s", "3 u2 16m0s", "4 u2 16m0s"}, got, what)
	}
	res, err := p.FindObjects(ctx, query.ObjectQuery{Resource: "pods"})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Len(t, res[0].Windows, 1)
	assert.Equal(t, uint8(0b1001), res[0].Windows[0].Segments)
	assert.Equal(t, again, res[0].Object, "the latest object span's reference")
	got, err := p.GetTraces(ctx, res[0].Windows)
	require.NoError(t, err)
	check("GetTraces, the segments found", got[0])
	whole := res[0].Windows[0]
	whole.Segments = 0
	got, err = p.GetTraces(ctx, []query.ObjectWindow{whole})
	require.NoError(t, err)
	check("GetTraces, every segment", got[0])
	all, err := p.GetTrace(ctx, whole.TraceID)
	require.NoError(t, err)
	check("GetTrace", all)
}

// A store written before segments (schema version 2) keeps its windows as they are: opened
// writable it records the window after the current one and after the newest it holds as the
// first with segments, reads and writes the windows before it without them, and every read sees
// both layouts.
func TestSegmentsFromTheWindowAfterAnUpgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const win = 30 * time.Minute
	now := time.Now().UTC()
	past := now.Truncate(win).Add(-2 * win)
	future := now.Truncate(win).Add(3 * win) // within the store's maxFutureSkew
	obj := aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "ns", Name: "p"}

	p := openTestPebble(t, Config{Dir: dir}, nil)
	asBeforeSegments(t, p)
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(obj, past, aggregator.KindEvent, 1, time.Minute, "create"),
		segSpan(obj, past, aggregator.KindEvent, 2, 25*time.Minute, "update"),
		segSpan(obj, future, aggregator.KindEvent, 3, time.Minute, "update"),
	}))
	require.NoError(t, p.close())

	p = openTestPebble(t, Config{Dir: dir}, nil)
	v, closer, err := p.db.Get(versionKey)
	require.NoError(t, err)
	assert.Equal(t, schemaVersion, string(v))
	require.NoError(t, closer.Close())
	assert.Equal(t, future.Add(win).UnixNano(), p.segFrom.Load(), "after the newest window stored")
	assert.False(t, p.segmented(future.UnixNano()))
	assert.True(t, p.segmented(future.Add(win).UnixNano()))

	// Late writes to an old window stay without segments; a new window has them.
	next := future.Add(win)
	require.NoError(t, p.Export(ctx, []*aggregator.Span{
		segSpan(obj, past, aggregator.KindEvent, 4, 20*time.Minute, "patch"),
		segSpan(obj, next, aggregator.KindEvent, 5, 20*time.Minute, "delete"),
	}))
	require.NoError(t, p.Sync(ctx))
	lens := map[byte]int{}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSpan}, UpperBound: []byte{prefixSpan + 1}})
	require.NoError(t, err)
	for ok := it.First(); ok; ok = it.Next() {
		lens[it.Key()[len(it.Key())-spanIDLen]] = len(it.Key())
	}
	require.NoError(t, it.Close())
	assert.Equal(t, map[byte]int{1: spanKeyLen, 2: spanKeyLen, 3: spanKeyLen, 4: spanKeyLen, 5: spanKeyLen + 1}, lens)

	check := func() {
		t.Helper()
		res, err := p.FindObjects(ctx, query.ObjectQuery{Resource: "pods"})
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.Len(t, res[0].Windows, 3)
		got, err := p.GetTraces(ctx, res[0].Windows)
		require.NoError(t, err)
		var ids [][]byte
		for _, spans := range got {
			var w []byte
			for _, sp := range spans {
				w = append(w, sp.SpanID[0])
			}
			ids = append(ids, w)
		}
		assert.Equal(t, [][]byte{{1, 4, 2}, {3}, {5}}, ids)
		for i, tid := range []trace.TraceID{res[0].Windows[0].TraceID, res[0].Windows[2].TraceID} {
			spans, err := p.GetTrace(ctx, tid)
			require.NoError(t, err)
			assert.Len(t, spans, []int{3, 1}[i])
		}
	}
	check()
	require.NoError(t, p.close())

	// Reopened, the first window with segments is the one recorded.
	p = openTestPebble(t, Config{Dir: dir}, nil)
	assert.Equal(t, next.UnixNano(), p.segFrom.Load())
	check()
}

// dropRepeats keeps the newer of each repeated object or link span, however many a trace has
// (compared pairwise up to 16, then in a map), and every event span.
func TestDropRepeats(t *testing.T) {
	w := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	obj := aggregator.ObjectRef{Cluster: "c", Resource: "nodes", Name: "n"}
	for _, links := range []int{3, 40} {
		var spans []*aggregator.Span
		for pass := range 2 { // the second pass: each link again, a minute later (newer)
			spans = append(spans, segSpan(obj, w, aggregator.KindObject, 0, 0, ""))
			for l := range links {
				spans = append(spans, segSpan(obj, w, aggregator.KindLink, byte(1+l), time.Duration(1+pass)*time.Minute, ""))
			}
			spans = append(spans, segSpan(obj, w, aggregator.KindEvent, byte(100+pass), time.Minute, "update"))
		}
		got := dropRepeats(spans)
		require.Len(t, got, 1+links+2, links)
		seen := map[byte]bool{}
		for _, sp := range got {
			assert.False(t, seen[sp.SpanID[0]], "span %d once", sp.SpanID[0])
			seen[sp.SpanID[0]] = true
			if sp.Kind == aggregator.KindLink {
				assert.Equal(t, 2*time.Minute, sp.Start.Sub(w), "the newer version of link %d", sp.SpanID[0])
			}
		}
	}
}
