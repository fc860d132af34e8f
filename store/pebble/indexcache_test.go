package pebble

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/heaptest"
)

// TestIndexCacheHeapPerTrace: the cache of traces whose index entries were written holds a
// small fixed-size entry per trace that keeps none of the span's strings alive: 20,000 traces of
// objects with 200-byte names take less than 150 bytes of Go heap each once their spans are
// written (72 measured; about 450 when the entry held the object reference and its strings),
// and a changed reference is still written.
func TestIndexCacheHeapPerTrace(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dir: t.TempDir(), IndexCacheSize: 50_000}
	p := openTestPebble(t, cfg, nil)
	long := strings.Repeat("x", 200)
	obj := func(i int) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods",
			Namespace: "ns-" + strconv.Itoa(i%100), Name: long + strconv.Itoa(i), UID: "uid-" + strconv.Itoa(i)}
	}
	w := t0
	write := func(p *Store, from, to int) {
		spans := make([]*aggregator.Span, 0, 100)
		for i := from; i < to; i++ {
			spans = append(spans, objectSpan(obj(i), w))
			if len(spans) == cap(spans) || i == to-1 {
				require.NoError(t, p.Export(ctx, spans))
				spans = spans[:0]
			}
		}
		require.NoError(t, p.Sync(ctx))
	}
	const n = 20_000
	write(p, 0, n)
	require.Equal(t, n, p.index.Len())
	// The store is closed before the heap is measured: a flush or compaction running between the
	// two measurements would change the heap by megabytes. The closed store keeps its cache.
	require.NoError(t, p.close())
	kept := heaptest.Live()
	p.index.Purge()
	purged := heaptest.Live()
	perTrace := (int64(kept) - int64(purged)) / n
	t.Logf("%d bytes of heap per trace remembered", perTrace)
	assert.Less(t, perTrace, int64(150))

	// Reopened with an empty cache, the store writes again, and a new reference of a trace (the
	// object was recreated: a new UID) replaces the stored one.
	p = openTestPebble(t, cfg, nil)
	write(p, 0, 10)
	recreated := obj(7)
	recreated.UID = "uid-new"
	require.NoError(t, p.Export(ctx, []*aggregator.Span{objectSpan(recreated, w)}))
	require.NoError(t, p.Sync(ctx))
	ref, err := p.traceObject(w.UnixNano(), aggregator.TraceIDFor(recreated.Key(), w))
	require.NoError(t, err)
	assert.Equal(t, "uid-new", ref.UID)
}

// TestIndexCacheCountsEvictions: the cache is bounded by IndexCacheSize, counts the traces it
// evicted, and a trace evicted and written again still has its index entries.
func TestIndexCacheCountsEvictions(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, Config{IndexCacheSize: 4}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	obj := func(i int) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p" + strconv.Itoa(i)}
	}
	for i := range 10 {
		require.NoError(t, p.Export(ctx, []*aggregator.Span{objectSpan(obj(i), t0)}))
	}
	require.NoError(t, p.Sync(ctx))
	assert.Equal(t, 4, p.index.Len())
	assert.Equal(t, int64(6), metricValue(t, reader, "kelemetry.store.indexcache.evictions", ""))
	// The first trace was evicted: written again, its entry is read back from the store rather
	// than written anew, and the object is still found.
	require.NoError(t, p.Export(ctx, []*aggregator.Span{objectSpan(obj(0), t0)}))
	require.NoError(t, p.Sync(ctx))
	ref, err := p.traceObject(t0.UnixNano(), aggregator.TraceIDFor(obj(0).Key(), t0))
	require.NoError(t, err)
	assert.Equal(t, "p0", ref.Name)
}
