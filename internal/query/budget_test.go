package query_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
)

// wideWorld is a Deployment with one ReplicaSet and n Pods of 5 events each, in one window.
func wideWorld(t testing.TB, n int) *memory.Store {
	t.Helper()
	var w world
	dep, rs := obj("deployments", "web"), obj("replicasets", "web-1")
	w.link(dep, rs, w0, "children")
	for p := range n {
		pod := obj("pods", fmt.Sprintf("web-1-%04d", p))
		w.link(rs, pod, w0, "children")
		for e := range 5 {
			w.event(pod, w0.Add(time.Duration(e+1)*time.Minute), fmt.Sprintf("%d-%d", p, e))
		}
	}
	st := memory.New(memory.Config{}, 0)
	require.NoError(t, st.Export(context.Background(), w.spans))
	return st
}

func countEvents(g *query.Graph) int {
	n := 0
	for _, o := range g.Objects {
		n += len(o.Events)
	}
	return n
}

func TestSpanBudgetTruncatesSearch(t *testing.T) {
	st := wideWorld(t, 200)
	q := query.Query{Resource: "deployments", Name: "web"}

	gs := search(t, st, query.Config{PerLevel: 1000, Total: 1000}, q, query.LinkFullTree)
	require.Len(t, gs, 1)
	assert.Empty(t, gs[0].Truncated, "within the default budget")
	assert.Equal(t, 1000, countEvents(gs[0]))

	gs = search(t, st, query.Config{PerLevel: 1000, Total: 1000, MaxSpans: 300}, q, query.LinkFullTree)
	require.Len(t, gs, 1)
	g := gs[0]
	assert.Equal(t, "result truncated: span budget of 300 reached; narrow the time range", g.Truncated)
	assert.Less(t, countEvents(g), 300, "no more spans are read past the budget")
	assert.Positive(t, countEvents(g), "what fits in the budget is shown")
	assert.Len(t, g.Objects, 202, "the objects found are still named")
}

// slowReader blocks GetTraces after the first calls until the request's context ends.
type slowReader struct {
	store.Reader
	free  int32
	calls atomic.Int32
}

func (r *slowReader) GetTraces(ctx context.Context, ws []store.ObjectWindow) ([][]*aggregator.Span, error) {
	if r.calls.Add(1) > r.free {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return r.Reader.GetTraces(ctx, ws)
}

func TestTimeBudgetTruncatesSearch(t *testing.T) {
	st := &slowReader{Reader: wideWorld(t, 20), free: 2}
	e := query.NewEngine(st, 0, query.Config{Timeout: 100 * time.Millisecond})
	start := time.Now()
	gs, err := e.Search(context.Background(), query.Query{Resource: "deployments", Name: "web"}, query.LinkFullTree)
	require.NoError(t, err, "what was read before the deadline is a result")
	assert.Less(t, time.Since(start), 5*time.Second)
	require.Len(t, gs, 1)
	assert.Equal(t, "result truncated: time budget of 100ms reached; narrow the time range", gs[0].Truncated)

	// Nothing read before the deadline: an error that says so.
	st = &slowReader{Reader: wideWorld(t, 2)}
	e = query.NewEngine(st, 0, query.Config{Timeout: 50 * time.Millisecond})
	_, err = e.Search(context.Background(), query.Query{Resource: "deployments", Name: "web"}, query.LinkFullTree)
	require.ErrorIs(t, err, query.ErrBudget)
	assert.ErrorContains(t, err, "time budget of 50ms reached")
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, query.Config{}.Validate())
	err := query.Config{MaxSpans: -1, Timeout: -time.Second, MaxConcurrent: -2}.Validate()
	require.Error(t, err)
	for _, key := range []string{"maxSpans", "timeout", "maxConcurrent"} {
		assert.ErrorContains(t, err, key)
	}
	d := query.Config{}.WithDefaults()
	assert.Equal(t, query.Config{Depth: 3, PerLevel: 100, Total: 500, MaxSpans: 200_000, MaxRenderBytes: 64 << 20,
		Timeout: 30 * time.Second, MaxConcurrent: 4, QueueWait: 2 * time.Second}, d)
}
