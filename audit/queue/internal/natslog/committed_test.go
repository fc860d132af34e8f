package natslog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/natsqueue"
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
	cfg, ctx, msgs := publishedPartition(t)

	var mu sync.Mutex
	handled := map[uint64]int{}
	var handledA, committedA, warmedB []uint64
	crashed := make(chan struct{})
	var fired atomic.Bool
	handler := func(member string) handler {
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
	runUntilDrained(ctx, t, cfg, b, err, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == len(msgs)
	})

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

// TestStoredRedeliveryNotHandledAgain: a member's handler writes each message's effect to a
// sink at once (as the aggregator exports spans before the batch's sync), and the member dies
// before its batch is committed: no commit marker names those messages. The member taking the
// partition over asks the storedCheck about the redeliveries, acknowledges those the sink
// holds without handling them (each effect is written once in all) and warms its state up with
// them; what the sink does not hold is handled. A check that fails makes the messages handled
// again.
func TestStoredRedeliveryNotHandledAgain(t *testing.T) {
	for _, failing := range []bool{false, true} {
		name := "check answers"
		if failing {
			name = "check fails"
		}
		t.Run(name, func(t *testing.T) {
			cfg, ctx, msgs := publishedPartition(t)

			var mu sync.Mutex
			written := map[string]int{} // the sink: payload -> copies written
			var writtenA, warmedB []string
			var asked [][]uint64
			crashed := make(chan struct{})
			var fired atomic.Bool
			handler := func(member string) handler {
				return func(hctx context.Context, d Delivery) error {
					if member == "a" && fired.Load() {
						<-hctx.Done()
						return hctx.Err()
					}
					mu.Lock()
					defer mu.Unlock()
					written[string(d.Payload)]++
					if member == "a" {
						writtenA = append(writtenA, string(d.Payload))
					}
					return nil
				}
			}
			a, err := NewConsumer(ctx, cfg, handler("a"), telemetry.Settings{}, WithCommitter(func(cctx context.Context) error {
				if fired.CompareAndSwap(false, true) {
					close(crashed)
				}
				<-cctx.Done() // dead before the commit: no marker
				return cctx.Err()
			}))
			require.NoError(t, err)
			require.NoError(t, a.Start(ctx))
			select {
			case <-crashed:
			case <-ctx.Done():
				t.Fatal("no batch handled")
			}
			a.kill()
			mu.Lock()
			stored := slices.Clone(writtenA)
			mu.Unlock()
			require.NotEmpty(t, stored)

			b, err := NewConsumer(ctx, cfg, handler("b"), telemetry.Settings{},
				WithWarmer(func(_ context.Context, d Delivery) {
					mu.Lock()
					defer mu.Unlock()
					warmedB = append(warmedB, string(d.Payload))
				}),
				WithStoredCheck(func(_ context.Context, ds []Delivery) ([]bool, error) {
					mu.Lock()
					defer mu.Unlock()
					var seqs []uint64
					out := make([]bool, len(ds))
					for i, d := range ds {
						seqs = append(seqs, d.Sequence)
						out[i] = written[string(d.Payload)] > 0
					}
					asked = append(asked, seqs)
					if failing {
						return nil, errors.New("backend down")
					}
					return out, nil
				}))
			runUntilDrained(ctx, t, cfg, b, err, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(written) == len(msgs)
			})

			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, asked, "the redeliveries were checked")
			for _, m := range stored {
				if failing {
					assert.Equal(t, 2, written[m], "message %s handled again after the failed check", m)
					continue
				}
				assert.Equal(t, 1, written[m], "message %s written once", m)
				assert.Contains(t, warmedB, m, "stored message %s warmed", m)
			}
			for _, m := range msgs {
				if !slices.Contains(stored, string(m.Payload)) {
					assert.Equal(t, 1, written[string(m.Payload)], "message %s written once", m.Payload)
				}
			}
		})
	}
}

// runUntilDrained starts the member b taking a partition over (err: NewConsumer's) and waits
// until done reports every message handled and the stream is drained.
func runUntilDrained(ctx context.Context, t *testing.T, cfg natsqueue.Config, b *Consumer, err error, done func() bool) {
	t.Helper()
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	l := newAckLog()
	require.Eventually(t, func() bool { return done() && l.drained(ctx, t, cfg, 0) },
		30*time.Second, 50*time.Millisecond, "every message handled and the stream drained")
}

// publishedPartition starts a JetStream server with a one-partition stream holding 20 messages
// of one key, and returns the configuration, the test's context and the messages.
func publishedPartition(t *testing.T) (natsqueue.Config, context.Context, []Message) {
	t.Helper()
	_, _, cfg, ctx, msgs := publishedPartitionOn(t)
	return cfg, ctx, msgs
}

// publishedPartitionOn is publishedPartition that also returns the server and the producer.
func publishedPartitionOn(t *testing.T) (*natstest.Node, *Producer, natsqueue.Config, context.Context, []Message) {
	t.Helper()
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	p := newProducer(t, cfg)
	ctx := testCtx(t, 60*time.Second)
	msgs := batch(1, 20, 0)
	require.NoError(t, p.Publish(ctx, msgs))
	return n, p, cfg, ctx, msgs
}
