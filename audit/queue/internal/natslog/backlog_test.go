package natslog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestPartitionOf(t *testing.T) {
	cfg := natsqueue.Config{SubjectPrefix: "kelemetry.audit", Partitions: 4}
	for _, tc := range []struct {
		subject string
		want    int
		ok      bool
	}{
		{"kelemetry.audit.c1.0", 0, true},
		{"kelemetry.audit.prod-eu.3", 3, true},
		{"kelemetry.audit.c1.4", 0, false}, // beyond Partitions
		{"kelemetry.audit.c1.x", 0, false},
		{"kelemetry.audit.c1.-1", 0, false},
		{"kelemetry.audit.dead.c1.1", 0, false},
		{"kelemetry.audit.1", 0, false},
		{"other.c1.1", 0, false},
	} {
		p, ok := partitionOf(cfg, tc.subject)
		assert.Equal(t, tc.ok, ok, tc.subject)
		assert.Equal(t, tc.want, p, tc.subject)
	}
}

// TestBacklogCountsOwnPartitionsOnceSettled: two static members, the second one stuck. Until
// the membership settled (about PinnedTTL after the start) each member's backlog is every
// partition's; then it is its own partitions' only: 0 for the member that handled its share
// while the stream still holds the stuck member's, which that member counts until it handled
// them.
func TestBacklogCountsOwnPartitionsOnceSettled(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Members = 2
	cfg.AckWait = 10 * time.Second // the stuck member's messages are not redelivered meanwhile
	ctx := testCtx(t, 60*time.Second)
	p := newProducer(t, cfg)

	gate := make(chan struct{})
	member := func(idx int, h handler) *Consumer {
		mc := cfg
		mc.Member = idx
		c, err := NewConsumer(ctx, mc, h, telemetry.Settings{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		return c
	}
	a := member(0, func(context.Context, Delivery) error { return nil })
	b := member(1, func(hctx context.Context, _ Delivery) error {
		select {
		case <-gate:
			return nil
		case <-hctx.Done():
			return hctx.Err()
		}
	})

	msgs := batch(20, 1, 0)
	perPart := make([]int, cfg.Partitions)
	for _, m := range msgs {
		perPart[Partition(m.Key, cfg.Partitions)]++
	}
	ownA, ownB := perPart[0]+perPart[2], perPart[1]+perPart[3]
	require.Positive(t, ownA, "member 0's partitions get messages")
	require.Positive(t, ownB, "member 1's partitions get messages")
	require.NoError(t, p.Publish(ctx, msgs))

	got, err := a.Backlog(ctx)
	require.NoError(t, err)
	assert.Equal(t, Backlog{Messages: len(msgs), Stream: len(msgs), Partitions: []int{0, 1, 2, 3}}, got,
		"before settling, every partition counts")

	require.NoError(t, a.Start(ctx))
	require.NoError(t, b.Start(ctx))
	require.Eventually(t, func() bool {
		got, err = a.Backlog(ctx)
		return err == nil && got.Settled && got.Messages == 0
	}, 20*time.Second, 20*time.Millisecond, "member 0 caught up with its partitions: %+v %v", got, err)
	assert.Equal(t, Backlog{Messages: 0, Stream: ownB, Partitions: []int{0, 2}, Settled: true}, got)
	require.Eventually(t, func() bool { // b started a moment after a: it settles a moment later
		got, err = b.Backlog(ctx)
		return err == nil && got.Settled
	}, 20*time.Second, 20*time.Millisecond, "member 1 settled: %+v %v", got, err)
	assert.Equal(t, Backlog{Messages: ownB, Stream: ownB, Partitions: []int{1, 3}, Settled: true}, got,
		"the stuck member counts its partitions' messages")

	close(gate)
	require.Eventually(t, func() bool {
		got, err = b.Backlog(ctx)
		return err == nil && got.Messages == 0
	}, 20*time.Second, 20*time.Millisecond, "member 1 caught up: %+v %v", got, err)
	assert.Zero(t, got.Stream)
}
