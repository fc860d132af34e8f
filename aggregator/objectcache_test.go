package aggregator_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/heaptest"
)

// countingSink counts the object spans exported and keeps nothing.
type countingSink struct{ objects atomic.Int64 }

func (s *countingSink) Export(_ context.Context, spans []*aggregator.Span) error {
	for _, sp := range spans {
		if sp.Kind == aggregator.KindObject {
			s.objects.Add(1)
		}
	}
	return nil
}

// TestObjectCacheHeapPerObject: the engine remembers each object it saw in a window (so that
// its object span is emitted once) in a small fixed-size entry that keeps none of the event's
// strings alive: 20,000 objects with 200-byte names take less than 250 bytes of heap each once
// their events are gone (they took about 700 when the entry held the object's key), and each is
// still remembered.
func TestObjectCacheHeapPerObject(t *testing.T) {
	sink := &countingSink{}
	e := newEngine(t, aggregator.Config{SpanCacheSize: 50_000}, aggregator.Deps{Sinks: []aggregator.Sink{sink}})
	ctx := context.Background()
	const n = 20_000
	long := strings.Repeat("x", 200)
	obj := func(i int) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods",
			Namespace: "ns-" + strconv.Itoa(i%100), Name: long + strconv.Itoa(i)}
	}
	require.NoError(t, e.Send(ctx, event(obj(-1), "warm-up", base)))
	before := heaptest.Live()
	for i := range n {
		require.NoError(t, e.Send(ctx, event(obj(i), "a", base)))
	}
	after := heaptest.Live()
	perObject := (int64(after) - int64(before)) / n
	t.Logf("%d bytes of heap per object remembered", perObject)
	assert.Less(t, perObject, int64(250))
	require.EqualValues(t, n+1, sink.objects.Load())

	// Remembered: a second event of each object in the window emits no object span.
	for i := range n {
		require.NoError(t, e.Send(ctx, event(obj(i), "b", base)))
	}
	assert.EqualValues(t, n+1, sink.objects.Load())
}
