package natsqueue

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestMarkEncoding(t *testing.T) {
	for _, seqs := range [][]uint64{nil, {7}, {3, 1, 18446744073709551615}} {
		got, err := decodeMark(encodeMark(seqs))
		require.NoError(t, err)
		assert.Equal(t, seqs, got)
	}
	for _, bad := range []string{",", "1,", "1,,2", "x", "-1"} {
		_, err := decodeMark([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// TestCommittedBatchNotHandledAgain: a member dies after its batch was committed and the commit
// marker written, before the acks; the member taking the partition over acknowledges the
// redelivered messages without handling them (each message is handled once in all) and warms
// its state up with them, and it handles the rest.
func TestCommittedBatchNotHandledAgain(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	p := newProducer(t, cfg)
	ctx := testCtx(t, 60*time.Second)
	msgs := batch(1, 20, 0)
	require.NoError(t, p.Publish(ctx, msgs))

	var mu sync.Mutex
	handled := map[uint64]int{}
	var handledA, committedA, warmedB []uint64
	crashed := make(chan struct{})
	var fired atomic.Bool
	handler := func(member string) Handler {
		return func(hctx context.Context, d Delivery) error {
			if member == "a" && fired.Load() {
				<-hctx.Done() // dead after the crash point
				return hctx.Err()
			}
			mu.Lock()
			defer mu.Unlock()
			handled[d.Sequence]++
			if member == "a" {
				handledA = append(handledA, d.Sequence)
			}
			return nil
		}
	}
	a, err := NewConsumer(ctx, cfg, handler("a"), telemetry.Settings{})
	require.NoError(t, err)
	a.crashBeforeAcks = func(int) bool {
		if !fired.CompareAndSwap(false, true) {
			return true // dead: nothing more is acknowledged
		}
		mu.Lock()
		committedA = slices.Clone(handledA)
		mu.Unlock()
		close(crashed)
		return true
	}
	require.NoError(t, a.Start(ctx))
	select {
	case <-crashed:
	case <-ctx.Done():
		t.Fatal("no batch committed")
	}
	a.kill()
	require.NotEmpty(t, committedA)

	b, err := NewConsumer(ctx, cfg, handler("b"), telemetry.Settings{}, WithWarmer(func(_ context.Context, d Delivery) {
		mu.Lock()
		defer mu.Unlock()
		warmedB = append(warmedB, d.Sequence)
	}))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	l := newAckLog()
	require.Eventually(t, func() bool {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		return n == len(msgs) && l.drained(ctx, t, cfg, 0)
	}, 30*time.Second, 50*time.Millisecond, "every message handled and the stream drained")

	mu.Lock()
	defer mu.Unlock()
	for seq, times := range handled {
		assert.Equal(t, 1, times, "message %d handled more than once", seq)
	}
	for _, seq := range committedA {
		assert.Contains(t, warmedB, seq, "committed message %d warmed", seq)
	}
	assert.True(t, slices.IsSorted(warmedB), "warmed in stream order: %v", warmedB)
}
