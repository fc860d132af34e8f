package audit

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/telemetry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsumerThroughQueue runs the consumer as the queue's handler over the rollout fixture.
func TestConsumerThroughQueue(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	c, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: agg})
	require.NoError(t, err)
	q, err := queue.New(queue.Config{Capacity: 64, Partitions: 3}, queue.Deps{Handle: c.Handle})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	stats, err := auditlog.ReplayFile(ctx, filepath.Join("..", "testdata", "rollout", "audit.jsonl"), "kind", q, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, auditlog.ReplayStats{Lines: 205, Events: 205}, stats)
	require.NoError(t, q.Stop(ctx))
	sent := agg.Events()
	require.Len(t, sent, 142)

	// Per object, events arrive in file order.
	order := map[string]int{}
	for i, ev := range auditfixture.Events(t, "rollout") {
		order[ev.AuditID+"/"+ev.Stage] = i
	}
	last := map[aggregator.ObjectKey]int{}
	for _, ev := range sent {
		i, ok := order[ev.ID]
		require.True(t, ok, ev.ID)
		// generateName creates are partitioned by collection, so only check events naming the object.
		if prev, seen := last[ev.Object.Key()]; seen && !strings.HasSuffix(ev.Title, " create") {
			assert.Greater(t, i, prev, "events of %s out of order", ev.Object.Key())
		}
		last[ev.Object.Key()] = i
	}
}
