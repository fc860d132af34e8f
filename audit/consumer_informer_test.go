package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/aggregator/aggregatortest"
	"github.com/kelemetry/kelemetry/diff"
)

// metadataEvent is a Metadata-level audit event (no bodies) of verb on deployment default/name,
// completed at end.
func metadataEvent(id, verb, name, rv string, end time.Time) *Event {
	return &Event{
		AuditID: id, Stage: "ResponseComplete", Verb: verb, Level: "Metadata",
		User: UserInfo{Username: "alice"},
		ObjectRef: &ObjectReference{Resource: "deployments", Namespace: "default", Name: name,
			APIGroup: "apps", APIVersion: "v1", ResourceVersion: rv},
		ResponseStatus:           &Status{Code: 200},
		RequestReceivedTimestamp: end.Add(-10 * time.Millisecond),
		StageTimestamp:           end,
	}
}

func deployKey(name, rv string) diff.RecordKey {
	return diff.RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func replicasChange(name, base, rv string) diff.Record {
	return diff.Record{Key: deployKey(name, rv), Kind: diff.KindChange, BaseRV: base, Time: time.Now(),
		Changes: []diff.Change{{Path: "spec.replicas", Op: diff.OpReplace, Old: json.RawMessage("2"), New: json.RawMessage("4")}}}
}

func newJoinConsumer(t *testing.T, cfg InformerJoinConfig) (*Consumer, *aggregatortest.RecordingAggregator, *diff.ChangeCache) {
	t.Helper()
	agg := &aggregatortest.RecordingAggregator{}
	c, err := NewConsumer(ConsumerConfig{InformerJoin: cfg}, agg, nil, nil)
	require.NoError(t, err)
	cache, err := diff.NewChangeCache(diff.ChangeCacheConfig{}, nil)
	require.NoError(t, err)
	c.SetInformerDiffs(cache)
	return c, agg, cache
}

func diffMessages(ev *aggregator.Event) []string {
	var out []string
	for _, l := range ev.Logs {
		if l.Type == aggregator.LogTypeDiff || l.Type == aggregator.LogTypeSnapshot {
			out = append(out, l.Message)
		}
	}
	return out
}

func TestConsumerInformerJoinImmediate(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{})
	ctx := context.Background()
	now := time.Now()
	cache.Put(replicasChange("web", "5", "6"))
	cache.Put(diff.Record{Key: deployKey("old", "9"), Kind: diff.KindDeletion, Snapshot: []byte(`{"kind":"Deployment"}`), Time: now})

	c.Handle(ctx, "c1", metadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", metadataEvent("d1", "delete", "old", "", now))
	c.Handle(ctx, "c1", metadataEvent("p1", "patch", "web", "", now))
	evs := agg.Events()
	require.Len(t, evs, 3, "nothing is held when the record is there or cannot be found")

	assert.Equal(t, []string{"spec.replicas 2 -> 4"}, diffMessages(evs[0]))
	attrs := attrMap(evs[0].Attributes)
	assert.Equal(t, "5", attrs[diff.AttrBaseRV])
	assert.Equal(t, "6", attrs[aggregator.AttrNewRV])
	assert.NotEmpty(t, attrs[AttrInformerLatency])

	require.Len(t, logsOfType(evs[1], aggregator.LogTypeSnapshot), 1)
	assert.Equal(t, `{"kind":"Deployment"}`, evs[1].Logs[0].Message)

	assert.Equal(t, []string{"diff unavailable: the audit event names no resourceVersion (Metadata-level audit of a patch)"}, diffMessages(evs[2]))
}

func TestConsumerInformerJoinNotStartedOrOld(t *testing.T) {
	c, agg, _ := newJoinConsumer(t, InformerJoinConfig{})
	ctx := context.Background()
	c.Handle(ctx, "c1", metadataEvent("u1", "update", "web", "5", time.Now()))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	c.Handle(ctx, "c1", metadataEvent("u2", "update", "web", "5", time.Now().Add(-time.Hour)))
	evs := agg.Events()
	require.Len(t, evs, 2, "not started: looked up once; an old event: looked up once")
	for _, ev := range evs {
		msgs := diffMessages(ev)
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], "diff unavailable")
	}
}

// TestConsumerInformerJoinLate: a write whose diff is not there yet is held without holding up
// anything else, and goes out once the informer records it.
func TestConsumerInformerJoinLate(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 10 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })

	now := time.Now()
	c.Handle(ctx, "c1", metadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", consumerEvent())                                 // another object: a body, the stream diff
	c.Handle(ctx, "c1", metadataEvent("u2", "update", "other", "", now)) // another object, no rv: not held
	c.Handle(ctx, "c1", metadataEvent("u3", "create", "web", "", now))   // the same object, not joined
	require.Len(t, agg.Events(), 3, "the held event blocks nothing")

	cache.Put(replicasChange("web", "5", "6"))
	require.Eventually(t, func() bool { return len(agg.Events()) == 4 }, 5*time.Second, time.Millisecond)
	held := agg.Events()[3]
	assert.Equal(t, "u1/ResponseComplete", held.ID)
	assert.Equal(t, []string{"spec.replicas 2 -> 4"}, diffMessages(held))
}

func TestConsumerInformerJoinDeadlineAndBounds(t *testing.T) {
	c, agg, _ := newJoinConsumer(t, InformerJoinConfig{Wait: 50 * time.Millisecond, Interval: 5 * time.Millisecond, MaxPending: 1})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	now := time.Now()
	c.Handle(ctx, "c1", metadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", metadataEvent("u2", "update", "web2", "7", now))
	evs := agg.Events()
	require.Len(t, evs, 1, "the second one does not fit")
	assert.Equal(t, []string{"diff unavailable: too many events waiting for informer diffs"}, diffMessages(evs[0]))

	require.Eventually(t, func() bool { return len(agg.Events()) == 2 }, 5*time.Second, time.Millisecond)
	msgs := diffMessages(agg.Events()[1])
	require.Len(t, msgs, 1)
	assert.True(t, strings.HasPrefix(msgs[0], "diff unavailable: the informer did not see this update within"), msgs[0])

	// Stop sends what is still held.
	c.Handle(ctx, "c1", metadataEvent("d1", "delete", "web", "", time.Now()))
	require.Len(t, agg.Events(), 2)
	require.NoError(t, c.Stop(ctx))
	evs = agg.Events()
	require.Len(t, evs, 3)
	assert.Equal(t, []string{"diff unavailable: shutting down before the informer saw this version"}, diffMessages(evs[2]))
	require.NoError(t, c.Stop(ctx), "stop twice")
}

func TestConsumerInformerJoinSkipsBodies(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{})
	cache.Put(replicasChange("web", "41", "42"))
	c.Handle(context.Background(), "c1", consumerEvent()) // has the response object: the stream diff
	evs := agg.Events()
	require.Len(t, evs, 1)
	assert.NotContains(t, diffMessages(evs[0]), "spec.replicas 2 -> 4")
	assert.Empty(t, attrMap(evs[0].Attributes)[AttrInformerLatency])
}

func TestInformerJoinConfigValidate(t *testing.T) {
	require.Error(t, ConsumerConfig{InformerJoin: InformerJoinConfig{Wait: -1}}.Validate())
	require.NoError(t, ConsumerConfig{}.Validate())
}
