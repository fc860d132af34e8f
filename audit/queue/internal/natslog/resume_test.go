package natslog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestRestartResumesFromAcknowledgedPosition(t *testing.T) {
	n, p, cfg, ctx, _ := publishedPartitionOn(t)
	// The stuck messages are redelivered to the first consumer every AckWait while it runs: they
	// must not reach MaxDeliveries (and the dead-letter stream), however slowly a loaded machine
	// gets through the first ten.
	cfg.MaxDeliveries = 30

	var mu sync.Mutex
	var first, second []int
	a, err := NewConsumer(ctx, cfg, func(hctx context.Context, d Delivery) error {
		_, num := splitPayload(string(d.Payload))
		if num >= 10 {
			<-hctx.Done() // stuck until the consumer stops
			return hctx.Err()
		}
		mu.Lock()
		first = append(first, num)
		mu.Unlock()
		return nil
	}, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(first) == 10 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, a.Stop(ctx))

	// Restart everything: the server on the same store, then a new consumer.
	p.Close()
	n.Stop()
	n.Start()
	var b *Consumer
	require.Eventually(t, func() bool {
		var err error
		b, err = NewConsumer(ctx, cfg, func(_ context.Context, d Delivery) error {
			_, num := splitPayload(string(d.Payload))
			mu.Lock()
			second = append(second, num)
			mu.Unlock()
			return nil
		}, telemetry.Settings{})
		return err == nil
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(second) >= 10 }, 30*time.Second, 10*time.Millisecond)
	// Every stored message acknowledged (the stream is a work queue: it is empty), then no handler
	// runs any more: what second holds now is all the new consumer handled.
	nc, err := nats.Connect(n.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := js.Stream(ctx, cfg.WithDefaults().Stream)
		return err == nil && s.CachedInfo().State.Msgs == 0
	}, 10*time.Second, 20*time.Millisecond, "every message acknowledged")
	require.NoError(t, b.Stop(ctx))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, first)
	assert.Equal(t, []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, second, "resumes after the last acknowledged message, nothing twice")
}

// counter sums an int64 metric's points, restricted to kind when set.
func counter(t *testing.T, r *sdkmetric.ManualReader, name, kind string) int64 {
	t.Helper()
	return telemetrytest.Int64(t, r, name, "kind", kind)
}

func TestMetrics(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	cfg.MaxMsgs = 5
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	set := telemetry.Settings{MeterProvider: mp}
	ctx := testCtx(t, 30*time.Second)

	p, err := NewProducer(ctx, cfg, set)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	// Every counter is exported at 0 from the start, each kind and outcome included.
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.natsqueue.published"))
	assert.Equal(t, telemetrytest.Zeros("kind", "full", "unavailable", "other"), telemetrytest.Points(t, reader, "kelemetry.natsqueue.publish_errors"))
	require.NoError(t, p.Publish(ctx, batch(1, 5, 0)))
	require.ErrorIs(t, p.Publish(ctx, batch(1, 1, 5)), ErrFull)
	assert.Equal(t, int64(5), counter(t, reader, "kelemetry.natsqueue.published", ""))
	assert.Equal(t, int64(1), counter(t, reader, "kelemetry.natsqueue.publish_errors", "full"))

	c, err := NewConsumer(ctx, cfg, func(_ context.Context, d Delivery) error {
		if _, num := splitPayload(string(d.Payload)); num == 1 {
			return errors.New("poison")
		}
		return nil
	}, set)
	require.NoError(t, err)
	for _, name := range []string{"kelemetry.natsqueue.consumed", "kelemetry.natsqueue.redelivered", "kelemetry.natsqueue.dead_lettered",
		"kelemetry.natsqueue.committed_redeliveries", "kelemetry.natsqueue.duplicates", "kelemetry.natsqueue.stored_redeliveries",
		"kelemetry.natsqueue.stored_check_failures", "kelemetry.natsqueue.commit_marker_failures", "kelemetry.natsqueue.history_lagged",
		"kelemetry.natsqueue.history_copied", "kelemetry.natsqueue.partitions_released", "kelemetry.natsqueue.warm.messages"} {
		assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, name), name)
	}
	assert.Equal(t, telemetrytest.Zeros("outcome", "complete", "truncated", "timeout", "error"),
		telemetrytest.Points(t, reader, "kelemetry.natsqueue.warm.takeovers"))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.Eventually(t, func() bool {
		return counter(t, reader, "kelemetry.natsqueue.consumed", "") == 4 &&
			counter(t, reader, "kelemetry.natsqueue.dead_lettered", "") == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(cfg.MaxDeliveries-1), counter(t, reader, "kelemetry.natsqueue.redelivered", ""))
	assert.Equal(t, int64(1), counter(t, reader, "kelemetry.natsqueue.partitions_held", ""))
}

func TestStopDoesNotHangOnAStuckHandler(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	p := newProducer(t, cfg)
	ctx := testCtx(t, 30*time.Second)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	c, err := NewConsumer(ctx, cfg, func(context.Context, Delivery) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release // ignores its context
		return nil
	}, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	require.NoError(t, p.Publish(ctx, batch(1, 1, 0)))
	<-entered

	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, c.Stop(sctx), context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	close(release)
	c.wg.Wait()
}

// TestSecondCopyNotHandled: a retried publish that the stream stored twice (here: the stream's
// duplicate window is shorter than the retry's delay, as JetStream's check can also miss one
// across a leader change) is handled once; the copy is acknowledged and counted.
func TestSecondCopyNotHandled(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	p := newProducer(t, cfg)
	ctx := testCtx(t, 30*time.Second)

	nc, err := nats.Connect(n.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, cfg.WithDefaults().Stream)
	require.NoError(t, err)
	sc := s.CachedInfo().Config
	sc.Duplicates = 100 * time.Millisecond
	_, err = js.UpdateStream(ctx, sc)
	require.NoError(t, err)

	msgs := batch(3, 2, 0)
	require.NoError(t, p.Publish(ctx, msgs))
	time.Sleep(300 * time.Millisecond) // the behaviour under test, not a wait: the retry comes after the duplicate window
	require.NoError(t, p.Publish(ctx, msgs[:4]))
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(10), info.State.Msgs, "the stream holds both copies")

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	rec := newRecorder()
	c, err := NewConsumer(ctx, cfg, rec.handle, telemetry.Settings{MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 0
	}, 10*time.Second, 20*time.Millisecond, "both copies acknowledged")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	assert.Equal(t, len(msgs), rec.handled, "each message handled once")
	for _, m := range msgs {
		assert.Equal(t, 1, rec.ids[string(m.Payload)], m.ID)
	}
	assert.Equal(t, int64(4), counter(t, reader, "kelemetry.natsqueue.duplicates", ""))
}
