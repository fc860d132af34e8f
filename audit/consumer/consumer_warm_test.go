package consumer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
)

// TestConsumerWarmTakeover splits the recorded rollout between two consumers, as a queue
// partition moving from one replica to another: the second one warms up with the events the
// first one handled, emits nothing for them, and gives the rest the same diffs as a single
// consumer that handled everything.
func TestConsumerWarmTakeover(t *testing.T) {
	ctx := context.Background()
	events := auditfixture.Events(t, "rollout")
	ref := &aggregatortest.RecordingAggregator{}
	one, err := New(Config{}, Deps{Aggregator: ref})
	require.NoError(t, err)
	for _, ev := range events {
		one.Handle(ctx, "kind", ev)
	}
	want := map[string][]aggregator.Log{}
	for _, ev := range ref.Events() {
		want[ev.Object.String()+" "+ev.ID] = ev.Logs
	}

	for split := 1; split < len(events); split++ {
		agg := &aggregatortest.RecordingAggregator{}
		b, err := New(Config{}, Deps{Aggregator: agg})
		require.NoError(t, err)
		for _, ev := range events[:split] {
			b.Warm(ctx, "kind", ev)
		}
		require.Empty(t, agg.Events(), "warming emits nothing")
		for _, ev := range events[split:] {
			b.Handle(ctx, "kind", ev)
		}
		for _, ev := range agg.Events() {
			assert.Equal(t, want[ev.Object.String()+" "+ev.ID], ev.Logs, "split %d: %s %s", split, ev.Object, ev.Title)
		}
	}
}
