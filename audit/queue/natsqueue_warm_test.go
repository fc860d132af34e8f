package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/natstest"
)

// TestNATSQueueTakeoverDiffContinuous moves the recorded rollout's partition from one replica
// to another in the middle: the second replica warms its audit-stream diff up from the
// partition's history, so its spans carry the same diffs as one replica handling everything.
func TestNATSQueueTakeoverDiffContinuous(t *testing.T) {
	ctx := queue.Ctx(t)
	events := auditfixture.Events(t, "rollout")
	ref := &aggregatortest.RecordingAggregator{}
	one, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: ref})
	require.NoError(t, err)
	for _, ev := range events {
		one.Handle(ctx, "kind", ev)
	}
	want := map[string][]aggregator.Log{}
	for _, ev := range ref.Events() {
		want[ev.Object.String()+" "+ev.ID] = ev.Logs
	}

	js := natstest.StartJetStream(t)
	cfg := queue.NATSTestConfig(js.URL())
	cfg.Partitions = 1
	cfg.MaxInFlight = 1
	var handled atomic.Int64
	replica := func() (queue.Queue, *aggregatortest.RecordingAggregator) {
		agg := &aggregatortest.RecordingAggregator{}
		c, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: agg})
		require.NoError(t, err)
		q, err := queue.New(queue.Config{NATS: cfg}, queue.Deps{Handle: func(ctx context.Context, cluster string, ev *auditv1.Event) {
			c.Handle(ctx, cluster, ev)
			handled.Add(1)
		}, Warm: c.Warm})
		require.NoError(t, err)
		require.NoError(t, q.Start(ctx))
		t.Cleanup(func() { _ = q.Stop(context.Background()) })
		return q, agg
	}

	a, _ := replica()
	half := len(events) / 2
	for _, ev := range events[:half] {
		require.NoError(t, a.Enqueue(ctx, "kind", []*auditv1.Event{ev}))
	}
	require.Eventually(t, func() bool { return handled.Load() == int64(half) }, 20*time.Second, 10*time.Millisecond)
	b, aggB := replica()
	require.NoError(t, a.Stop(ctx)) // b takes the partition over
	for _, ev := range events[half:] {
		require.NoError(t, b.Enqueue(ctx, "kind", []*auditv1.Event{ev}))
	}
	require.Eventually(t, func() bool { return handled.Load() == int64(len(events)) }, 30*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, aggB.Events())
	for _, ev := range aggB.Events() {
		assert.Equal(t, want[ev.Object.String()+" "+ev.ID], ev.Logs, "%s %s", ev.Object, ev.Title)
	}
}
