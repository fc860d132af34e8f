package consumer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/telemetry"
)

// pausingDiffs is a change cache whose next Find, once armed, waits until released.
type pausingDiffs struct {
	*changes.Cache
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (p *pausingDiffs) Find(q changes.Query) (changes.Record, bool) {
	if p.armed.CompareAndSwap(true, false) {
		p.entered <- struct{}{}
		<-p.release
	}
	return p.Cache.Find(q)
}

// MaxPending bounds the events held at once, also while the join loop looks them up again
// (it takes them out of the pending list meanwhile).
func TestConsumerInformerJoinMaxPendingDuringRecheck(t *testing.T) {
	var src *pausingDiffs
	c, agg, _ := newJoinConsumerOver(t, InformerJoinConfig{Wait: 5 * time.Second, Interval: 5 * time.Millisecond, MaxPending: 2},
		func(cache *changes.Cache) InformerDiffs {
			src = &pausingDiffs{Cache: cache, entered: make(chan struct{}), release: make(chan struct{})}
			return src
		})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	now := time.Now()
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "update", "web2", "7", now))
	require.Empty(t, agg.Events(), "both held")

	src.armed.Store(true)
	select {
	case <-src.entered: // the join loop is looking u1 up again
	case <-time.After(5 * time.Second):
		t.Fatal("the join loop did not look up")
	}
	// Patches of web wait behind u1 without a look-up: they must not be held beyond the bound.
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p1", "patch", "web", "", now.Add(time.Millisecond)))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p2", "patch", "web", "", now.Add(2*time.Millisecond)))
	evs := agg.Events()
	close(src.release)
	require.Len(t, evs, 2, "two events are held already")
	for _, ev := range evs {
		assert.Equal(t, []string{"diff unavailable: too many events waiting for informer diffs"}, diffMessages(ev))
	}
}

// stuckAggregator's Send waits for its context (a sink that hangs), counting the calls.
type stuckAggregator struct{ calls, failed atomic.Int64 }

func (a *stuckAggregator) Send(ctx context.Context, _ *aggregator.Event) error {
	a.calls.Add(1)
	<-ctx.Done()
	a.failed.Add(1)
	return ctx.Err()
}

// When the aggregator hangs, Stop returns at its context's end, and the join loop's sends end
// with it: no goroutine stays stuck and every held event is accounted for (sent or failed),
// none silently forgotten.
func TestConsumerInformerJoinStopWithStuckAggregator(t *testing.T) {
	agg := &stuckAggregator{}
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	c, err := New(Config{InformerJoin: InformerJoinConfig{Wait: 30 * time.Millisecond, Interval: 5 * time.Millisecond}}, Deps{Aggregator: agg, InformerDiffs: cache})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	now := time.Now()
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now)) // sent at its deadline: the send hangs
	require.Eventually(t, func() bool { return agg.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "update", "web2", "7", time.Now().Add(time.Hour))) // held

	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, c.Stop(sctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
	require.Eventually(t, func() bool { return agg.failed.Load() == 2 }, 5*time.Second, time.Millisecond,
		"the hung send ends and the held event is tried too")
}
