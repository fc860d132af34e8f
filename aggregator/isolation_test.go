package aggregator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// stuckLinker stands for a remote linker whose worker does not answer: every Lookup waits for its
// context. It asks for link workers of its own (aggregator.IsolatedLinker).
type stuckLinker struct{ calls atomic.Int64 }

func (*stuckLinker) Name() string     { return "a-stuck" } // sorts before "static": runs first when shared
func (*stuckLinker) LinkWorkers() int { return 2 }
func (l *stuckLinker) Lookup(ctx context.Context, _ aggregator.Object) ([]aggregator.Link, error) {
	l.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestIsolatedLinkerDelaysOnlyItsOwnLinks(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	stuck := &stuckLinker{}
	// One shared worker and a long timeout: a stuck linker on the shared worker would hold every
	// other linker's links for 30s per object.
	e := newEngine(t, aggregator.Config{LinkWorkers: 1, LinkTimeout: 30 * time.Second},
		aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{stuck, ownerChain()}})
	ctx := context.Background()
	start := time.Now()
	require.NoError(t, e.Send(ctx, event(pod, "a", base)))
	other := pod
	other.Name = "other"
	require.NoError(t, e.Send(ctx, event(other, "b", base)))
	require.Eventually(t, func() bool { return len(linkSpans(sink.Spans())) == 4 }, 3*time.Second, 5*time.Millisecond,
		"the owner chain's links come while the stuck linker waits")
	assert.Less(t, time.Since(start), 3*time.Second)
	// The stuck linker's own workers take their jobs when they are scheduled, which under -race
	// can be after the owner chain's links arrived.
	assert.Eventually(t, func() bool { return stuck.calls.Load() >= 1 }, 3*time.Second, 5*time.Millisecond,
		"the stuck linker was called")

	stopCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, e.Stop(stopCtx), context.DeadlineExceeded, "Stop gives up on the stuck lookups")
}
