package natsqueue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/telemetry"
)

// fakeDiff stands in for the audit-stream diff of one member: it keeps each key's last payload
// number (the object's last version) and records, for every handled message, the version its
// diff would compare against.
type fakeDiff struct {
	mu     sync.Mutex
	last   map[string]int
	diffs  map[string][][2]int // key -> (old, new) in handling order; old -1: no previous version
	warmed int
}

func newFakeDiff() *fakeDiff { return &fakeDiff{last: map[string]int{}, diffs: map[string][][2]int{}} }

func (f *fakeDiff) handle(_ context.Context, d Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, n := splitPayload(string(d.Payload))
	old, ok := f.last[key]
	if !ok {
		old = -1
	}
	f.diffs[key] = append(f.diffs[key], [2]int{old, n})
	f.last[key] = n
	return nil
}

func (f *fakeDiff) warm(_ context.Context, d Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, n := splitPayload(string(d.Payload))
	f.last[key] = n
	f.warmed++
}

func (f *fakeDiff) handledN() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.diffs {
		n += len(d)
	}
	return n
}

// TestTakeoverKeepsDiffsContinuous kills the member holding half of the partitions in the
// middle of a stream of updates: the standby that takes them over first rebuilds its diff state
// from the partitions' history, so that every update it handles compares against the previous
// update's new value, for every object.
func TestTakeoverKeepsDiffsContinuous(t *testing.T) {
	n := singleNode(t)
	cfg := testConfig(n.url())
	cfg.Members = 2
	cfg.MaxInFlight = 1 // strict order across a crash
	p := newProducer(t, cfg)
	ctx := testCtx(t, 90*time.Second)
	fa, fb := newFakeDiff(), newFakeDiff()
	cfgB := cfg
	cfgB.Member = 1
	a, err := NewConsumer(ctx, cfg, fa.handle, telemetry.Settings{}, WithWarmer(fa.warm))
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	b, err := NewConsumer(ctx, cfgB, fb.handle, telemetry.Settings{}, WithWarmer(fb.warm))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(context.Background()) })

	const keys, updates = 12, 40
	first := batch(keys, updates/2, 0)
	require.NoError(t, p.Publish(ctx, first))
	require.Eventually(t, func() bool { return fa.handledN()+fb.handledN() == len(first) }, 30*time.Second, 20*time.Millisecond)
	require.NotZero(t, fa.handledN(), "a holds partitions")
	require.NotZero(t, fb.handledN(), "b holds partitions")

	second := batch(keys, updates/2, updates/2)
	require.NoError(t, p.Publish(ctx, second))
	require.Eventually(t, func() bool { return fa.handledN()+fb.handledN() > len(first)+keys }, 30*time.Second, 5*time.Millisecond)
	a.kill()
	t.Logf("a killed after %d+%d messages", fa.handledN(), fb.handledN())

	// Every update of every object is handled by b from now on, and each of b's diffs is continuous.
	require.Eventually(t, func() bool {
		fa.mu.Lock()
		defer fa.mu.Unlock()
		fb.mu.Lock()
		defer fb.mu.Unlock()
		for k := range keys {
			key := fmt.Sprintf("apps/deployments/default/d%d", k)
			if fa.last[key] != updates-1 && fb.last[key] != updates-1 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "all updates handled")
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fa.mu.Lock()
	defer fa.mu.Unlock()
	tookOver := 0
	for key, ds := range fb.diffs {
		if len(fa.diffs[key]) > 0 {
			tookOver++
		}
		for _, d := range ds {
			want := d[1] - 1 // the previous update's new value (-1: the object's first write)
			assert.Equal(t, want, d[0], "%s: update %d of b compares against %d", key, d[1], d[0])
		}
	}
	assert.NotZero(t, tookOver, "b took over objects a had handled")
	assert.NotZero(t, fb.warmed, "b warmed up from the history")
}
