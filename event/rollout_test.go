package event_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestRolloutPicture replays the recorded rollout, audit log and Events, through the consumer
// (with the audit-stream diff) and the aggregator: the Deployment's trace shows the image change,
// every replica change as diffs, the delete with a deletion snapshot, and the controller's Events.
func TestRolloutPicture(t *testing.T) {
	ctx := context.Background()
	sink := &aggregatortest.RecordingSink{}
	p, err := audittest.Start(ctx, audittest.Config{Cluster: "kind", Deps: aggregator.Deps{Sinks: []aggregator.Sink{sink}}})
	require.NoError(t, err)
	_, err = p.HandleFile(ctx, filepath.Join("..", "testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	st, err := event.ReplayFile(ctx, filepath.Join("..", "testdata", "rollout", "events-events-v1.json"),
		event.NewConverter("kind", nil, 0), p.Engine, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, p.Stop(ctx))
	assert.Equal(t, 30, st.Sent)

	var diffs []string
	var deletionSnapshot bool
	reasons := map[string]int{}
	var traces = map[string]bool{}
	for _, sp := range sink.Spans() {
		if sp.Object.Resource != "deployments" || sp.Object.Name != "demo" || sp.Kind != aggregator.KindEvent {
			continue
		}
		traces[sp.TraceID.String()] = true
		switch sp.Source {
		case event.SourceName:
			reasons[sp.Name]++
		case consumer.SourceName:
			for _, l := range sp.Logs {
				switch l.Type {
				case aggregator.LogTypeDiff:
					diffs = append(diffs, sp.Name+": "+l.Message)
				case aggregator.LogTypeSnapshot:
					if strings.HasSuffix(sp.Name, "delete") {
						deletionSnapshot = true
					}
				}
			}
		}
	}
	assert.Len(t, traces, 1)
	assert.Contains(t, diffs, "admin patch scale: spec.replicas 2 -> 4")
	assert.Contains(t, diffs, "admin patch scale: spec.replicas 4 -> 2")
	assert.Contains(t, diffs, "admin patch: spec.template.spec.containers[name=alpine].image alpine:3.16 -> alpine:3.17")
	assert.True(t, deletionSnapshot)
	assert.Equal(t, map[string]int{"ScalingReplicaSet": 10}, reasons)
	for _, d := range diffs {
		assert.NotContains(t, d, "managedFields")
	}
}
