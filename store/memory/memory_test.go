package memory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
)

func TestMemoryEvictsOldestWindows(t *testing.T) {
	ctx := context.Background()
	m := New(Config{MaxSpans: 4}, 0)
	obj := ref("c", "", "pods", "ns", "p")
	w0, w1, w2 := t0, t0.Add(win), t0.Add(2*win)
	require.NoError(t, m.Export(ctx, []*aggregator.Span{objectSpan(obj, w1), eventSpan(obj, w1, "a", 0)}))
	require.NoError(t, m.Export(ctx, []*aggregator.Span{objectSpan(obj, w0), eventSpan(obj, w0, "a", 0)}))
	assert.Equal(t, Stats{Spans: 4, Windows: 2}, m.Stats())

	// Replacing a span takes no room.
	require.NoError(t, m.Export(ctx, []*aggregator.Span{objectSpan(obj, w0)}))
	assert.Equal(t, Stats{Spans: 4, Windows: 2}, m.Stats())

	// Full: a span of the oldest window is dropped; a newer one evicts the oldest window.
	require.NoError(t, m.Export(ctx, []*aggregator.Span{eventSpan(obj, w0, "b", 0)}))
	assert.Equal(t, Stats{Spans: 4, Windows: 2, DroppedSpans: 1}, m.Stats())
	require.NoError(t, m.Export(ctx, []*aggregator.Span{objectSpan(obj, w2)}))
	assert.Equal(t, Stats{Spans: 3, Windows: 2, DroppedSpans: 3, DroppedWindows: 1}, m.Stats())

	_, err := m.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w0))
	assert.ErrorIs(t, err, query.ErrNotFound)
	res, err := m.FindObjects(ctx, query.ObjectQuery{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, []query.ObjectWindow{
		{Window: w1, TraceID: aggregator.TraceIDFor(obj.Key(), w1)},
		{Window: w2, TraceID: aggregator.TraceIDFor(obj.Key(), w2)},
	}, res[0].Windows)
}

func TestMemoryGetTraceReturnsCopies(t *testing.T) {
	ctx := context.Background()
	m := New(Config{}, 0)
	sp := objectSpan(ref("c", "", "pods", "ns", "p"), t0)
	require.NoError(t, m.Export(ctx, []*aggregator.Span{sp}))
	got, err := m.GetTrace(ctx, sp.TraceID)
	require.NoError(t, err)
	got[0].Name = "changed"
	assert.NotEqual(t, "changed", sp.Name)
}

func TestMemoryConfig(t *testing.T) {
	assert.NoError(t, Config{}.Validate())
	assert.Error(t, Config{MaxSpans: -1}.Validate())
	assert.Equal(t, defaultMaxSpans, Config{}.withDefaults().MaxSpans)
}

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return New(Config{}, 0) }, storetest.Limits{})
}

func TestMemorySearch(t *testing.T) {
	storetest.RunSearch(t, func(t *testing.T) storetest.Store { return New(Config{}, 0) }, storetest.Limits{})
}

func BenchmarkMemoryExport(b *testing.B) {
	storetest.BenchmarkExport(b, New(Config{}, 0))
}

// The span builders of the shared suites.
var (
	t0         = storetest.T0
	ref        = storetest.Ref
	objectSpan = storetest.ObjectSpan
	eventSpan  = storetest.EventSpan
)

const win = storetest.Win

// TestChangeFeed: the feed of the memory store (storetest.RunChanges).
func TestChangeFeed(t *testing.T) {
	storetest.RunChanges(t, "../..", func(t *testing.T) storetest.ChangeStore { return New(Config{}, 0) }, "rollout", "cronjob")
}
