package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue/internal/natslog"
	"github.com/kelemetry/kelemetry/internal/natstest"
)

// TestNATSQueueLenCountsTheStreamAfterRestart: a replica accepted events and died before
// handling them (its partitions stay pinned to it and its membership entry stays for PinnedTTL);
// the replica that starts after it handles them slowly. From its start until the last one is
// handled its Len (the queueDepth of /healthz) is never 0, then it is: 0 means caught up.
func TestNATSQueueLenCountsTheStreamAfterRestart(t *testing.T) {
	js := natstest.StartJetStream(t)
	cfg := natsTestConfig(js.URL())
	ctx := testCtx(t)

	stuck := newNATSHandled()
	stuck.gate = make(chan struct{}) // never opened: the first replica handles nothing
	q1, err := newNATS(cfg, Deps{Handle: stuck.handle})
	require.NoError(t, err)
	require.NoError(t, q1.Start(ctx))
	const n = 24
	body, ids := natsBatch("restart", n)
	events, err := auditv1.DecodeEventList([]byte(body))
	require.NoError(t, err)
	require.NoError(t, q1.Enqueue(ctx, "c1", events))
	// A crash: a Stop whose context has ended neither leaves the membership nor unpins.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	_ = q1.Stop(dead)

	slow := newNATSHandled()
	q2, err := newNATS(cfg, Deps{Handle: func(hctx context.Context, cluster string, ev *auditv1.Event) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-hctx.Done():
			return
		}
		slow.handle(hctx, cluster, ev)
	}})
	require.NoError(t, err)
	require.NoError(t, q2.Start(ctx))
	t.Cleanup(func() { _ = q2.Stop(context.Background()) })

	first := q2.Len()
	if len(slow.snapshot()) == 0 {
		assert.Equal(t, n, first, "right after the start, before handling anything, every unhandled message counts")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		depth := q2.Len()
		handled := len(slow.snapshot())
		require.LessOrEqual(t, depth, n, "Len counts what the stream holds")
		if depth == 0 {
			require.Equal(t, n, handled, "Len reads 0 only once every event was handled")
			break
		}
		require.True(t, time.Now().Before(deadline), "Len still %d after %d of %d events handled", depth, handled, n)
		time.Sleep(5 * time.Millisecond) // the interval of this poll loop (deadline above): every reading is checked
	}
	slow.requireExactlyOnce(t, ids)
	assert.Zero(t, q2.Len())
}

// TestNATSQueueLenAsksTheStreamSparingly: Len reuses the stream's answer for backlogTTL unless
// this process published since, waits backlogTimeout at most for a new one, and reports an
// answer it could not get as at least 1 (not known to be caught up).
func TestNATSQueueLenAsksTheStreamSparingly(t *testing.T) {
	q, err := newNATS(natsTestConfig("nats://127.0.0.1:1"), Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.NoError(t, err)
	q.backlogTTL, q.backlogTimeout = time.Hour, 50*time.Millisecond
	var (
		mu    sync.Mutex
		calls int
		block atomic.Bool
		fail  atomic.Bool
		held  = 3
	)
	fake := backlogFunc(func(ctx context.Context) (natslog.Backlog, error) {
		mu.Lock()
		calls++
		n := held
		mu.Unlock()
		if block.Load() {
			<-ctx.Done()
			return natslog.Backlog{}, ctx.Err()
		}
		if fail.Load() {
			return natslog.Backlog{}, errors.New("no responders")
		}
		return natslog.Backlog{Messages: n}, nil
	})
	q.backlogOf.Store(&fake)
	callCount := func() int { mu.Lock(); defer mu.Unlock(); return calls }

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.Equal(t, 3, q.Len())
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, callCount(), "concurrent and repeated calls share one answer")

	mu.Lock()
	held = 0
	mu.Unlock()
	assert.Equal(t, 3, q.Len(), "the cached answer, within backlogTTL")
	q.published.Add(1) // an Enqueue ended
	assert.Equal(t, 0, q.Len(), "asked again after a publish")
	assert.Equal(t, 2, callCount())

	q.published.Add(1)
	block.Store(true)
	start := time.Now()
	assert.Equal(t, 1, q.Len(), "an answer not received in time is not 0")
	assert.Less(t, time.Since(start), time.Second, "bounded by backlogTimeout")

	block.Store(false)
	fail.Store(true)
	q.backlogTTL = 0
	assert.Equal(t, 1, q.Len(), "a failed answer is not 0")

	q.handling.Add(5)
	fail.Store(false)
	assert.Equal(t, 5, q.Len(), "events being handled count when the stream's answer is smaller")
	q.handling.Add(-5)
	q.publishing.Add(2)
	assert.Equal(t, 2, q.Len(), "events being published count")
	q.publishing.Add(-2)

	q.backlogOf.Store(nil) // stopped
	assert.Zero(t, q.Len())
}
