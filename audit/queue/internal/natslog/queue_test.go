package natslog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// recorder is a Handler that records what it handled, per consumer.
type recorder struct {
	mu      sync.Mutex
	byKey   map[string][]int // key -> payload sequence numbers in handling order
	ids     map[string]int   // payload ID -> handled count
	acked   map[string]bool
	fail    func(d Delivery) error
	handled int
}

func newRecorder() *recorder {
	return &recorder{byKey: map[string][]int{}, ids: map[string]int{}, acked: map[string]bool{}}
}

func (r *recorder) handle(_ context.Context, d Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(d); err != nil {
			return err
		}
	}
	key, n := splitPayload(string(d.Payload))
	r.byKey[key] = append(r.byKey[key], n)
	r.ids[string(d.Payload)]++
	r.handled++
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handled
}

func payload(key string, n int) []byte { return []byte(key + "#" + strconv.Itoa(n)) }

func splitPayload(s string) (string, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '#' {
			n, _ := strconv.Atoi(s[i+1:])
			return s[:i], n
		}
	}
	return s, 0
}

func batch(keys, perKey, from int) []Message {
	var msgs []Message
	for n := from; n < from+perKey; n++ {
		for k := range keys {
			key := fmt.Sprintf("apps/deployments/default/d%d", k)
			msgs = append(msgs, Message{Cluster: "c1", Key: key, ID: string(payload(key, n)), Payload: payload(key, n)})
		}
	}
	return msgs
}

func startConsumer(t *testing.T, cfg natsqueue.Config, h handler) *Consumer {
	t.Helper()
	c, err := NewConsumer(testCtx(t, 10*time.Second), cfg, h, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func newProducer(t *testing.T, cfg natsqueue.Config) *Producer {
	t.Helper()
	p, err := NewProducer(testCtx(t, 10*time.Second), cfg, telemetry.Settings{})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func TestPartitionStable(t *testing.T) {
	assert.Equal(t, Partition("a/b", 16), Partition("a/b", 16))
	assert.Equal(t, 0, Partition("x", 0))
	seen := map[int]bool{}
	for i := range 100 {
		p := Partition("key"+strconv.Itoa(i), 16)
		require.True(t, p >= 0 && p < 16)
		seen[p] = true
	}
	assert.Greater(t, len(seen), 10, "keys spread over partitions")
}

func TestRoundTripOrderPerKey(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	p := newProducer(t, cfg)
	rec := newRecorder()
	startConsumer(t, cfg, rec.handle)

	ctx := testCtx(t, 30*time.Second)
	const keys, perKey = 10, 50
	for i := 0; i < perKey; i += 10 {
		require.NoError(t, p.Publish(ctx, batch(keys, 10, i)))
	}
	require.Eventually(t, func() bool { return rec.count() == keys*perKey }, 20*time.Second, 20*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.byKey, keys)
	for key, seq := range rec.byKey {
		for i, v := range seq {
			require.Equal(t, i, v, "order of %s", key)
		}
	}
	require.Error(t, p.Publish(ctx, []Message{{Cluster: "bad.cluster", Key: "k"}}))
}

func TestStreamFullThenRoom(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.MaxMsgs = 20
	p := newProducer(t, cfg)
	ctx := testCtx(t, 30*time.Second)

	require.NoError(t, p.Publish(ctx, batch(4, 5, 0)))
	err := p.Publish(ctx, batch(1, 1, 100))
	require.ErrorIs(t, err, ErrFull)
	require.NotErrorIs(t, err, ErrUnavailable)

	rec := newRecorder()
	c := startConsumer(t, cfg, rec.handle)
	require.Eventually(t, func() bool { return rec.count() == 20 }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, c.Stop(ctx))
	require.Eventually(t, func() bool { return p.Publish(ctx, batch(1, 1, 100)) == nil }, 5*time.Second, 50*time.Millisecond,
		"acknowledged messages leave the work queue and free room")
}

func TestUnavailableThenRecovery(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	p := newProducer(t, cfg)
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, p.Publish(ctx, batch(1, 1, 0)))

	n.Stop()
	start := time.Now()
	err := p.Publish(ctx, batch(2, 2, 1))
	require.ErrorIs(t, err, ErrUnavailable)
	require.Less(t, time.Since(start), cfg.PublishTimeout+time.Second, "fails within the publish timeout")

	n.Start()
	require.Eventually(t, func() bool { return p.Publish(ctx, batch(2, 2, 1)) == nil }, 20*time.Second, 100*time.Millisecond)
	rec := newRecorder()
	startConsumer(t, cfg, rec.handle)
	require.Eventually(t, func() bool { return rec.count() == 5 }, 10*time.Second, 20*time.Millisecond)
}

func TestRetryThenDeadLetter(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	p := newProducer(t, cfg)
	ctx := testCtx(t, 30*time.Second)

	attempts := map[string]int{}
	rec := newRecorder()
	rec.fail = func(d Delivery) error {
		attempts[string(d.Payload)]++
		key, num := splitPayload(string(d.Payload))
		_ = key
		switch {
		case num == 1: // poison: always fails, the last time with a panic
			if attempts[string(d.Payload)] == cfg.MaxDeliveries {
				panic("poison")
			}
			return errors.New("poison")
		case num == 2 && attempts[string(d.Payload)] < 2: // fails once, then succeeds
			return errors.New("transient")
		}
		return nil
	}
	startConsumer(t, cfg, rec.handle)
	require.NoError(t, p.Publish(ctx, batch(1, 4, 0)))
	require.Eventually(t, func() bool { return rec.count() == 3 }, 10*time.Second, 20*time.Millisecond)

	rec.mu.Lock()
	assert.Equal(t, []int{0, 2, 3}, rec.byKey["apps/deployments/default/d0"], "the partition continues after the poison message, in order")
	assert.Equal(t, cfg.MaxDeliveries, attempts["apps/deployments/default/d0#1"])
	assert.Equal(t, 2, attempts["apps/deployments/default/d0#2"])
	rec.mu.Unlock()

	nc, err := nats.Connect(n.URL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	dead, err := js.Stream(ctx, deadStream(cfg.WithDefaults()))
	require.NoError(t, err)
	m, err := dead.GetLastMsgForSubject(ctx, deadSubject(cfg.WithDefaults(), "c1", 0))
	require.NoError(t, err)
	assert.Equal(t, "apps/deployments/default/d0#1", string(m.Data))
	assert.Equal(t, "natsqueue: handler panicked: poison", m.Header.Get(headerError))
	assert.Equal(t, strconv.Itoa(cfg.MaxDeliveries), m.Header.Get(headerDeliveries))
	info, err := dead.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), info.State.Msgs, "dead-lettered once")
}

// TestCommitterBatches: a partition's pulled messages are handled in order as one batch, the
// Committer runs once per batch and is retried when it fails, and a message is acknowledged only
// after a commit that started once it was handled succeeded; a failed commit handles nothing
// twice.
func TestCommitterBatches(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 1
	cfg.MaxInFlight = 64
	p := newProducer(t, cfg)
	ctx := testCtx(t, 30*time.Second)

	gate := make(chan struct{})
	rec := newRecorder()
	handledAt := map[string]int{} // payload -> handled count when it was handled
	rec.fail = func(d Delivery) error {
		<-gate
		handledAt[string(d.Payload)] = rec.handled + 1
		return nil
	}
	var (
		mu                      sync.Mutex
		calls, failed, okCommit int
		committed               int // handled count at the start of the last successful commit
		acked                   = map[string]int{}
		earlyAcks               []string
	)
	commit := func(context.Context) error {
		handled := rec.count()
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			failed++
			return errors.New("sink down")
		}
		okCommit++
		committed = handled
		return nil
	}
	c, err := NewConsumer(ctx, cfg, rec.handle, telemetry.Settings{}, WithCommitter(commit))
	require.NoError(t, err)
	c.onAck = func(d Delivery) {
		rec.mu.Lock()
		at := handledAt[string(d.Payload)]
		rec.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		acked[string(d.Payload)]++
		if at == 0 || at > committed {
			earlyAcks = append(earlyAcks, string(d.Payload))
		}
	}
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	msgs := batch(3, 20, 0)
	require.NoError(t, p.Publish(ctx, msgs))
	close(gate)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) == len(msgs)
	}, 20*time.Second, 20*time.Millisecond)

	rec.mu.Lock()
	for k := range 3 {
		key := fmt.Sprintf("apps/deployments/default/d%d", k)
		want := make([]int, 20)
		for i := range want {
			want[i] = i
		}
		assert.Equal(t, want, rec.byKey[key], "key %s handled once each, in order", key)
	}
	rec.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, earlyAcks, "acknowledged before a commit covering them")
	assert.Equal(t, 2, failed)
	assert.LessOrEqual(t, okCommit, 10, "one commit per batch, not per message")
	for _, m := range msgs {
		assert.Equal(t, 1, acked[string(m.Payload)], "acknowledged once: %s", m.Payload)
	}
}
