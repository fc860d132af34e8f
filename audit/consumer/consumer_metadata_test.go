package consumer

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

const garbageCollector = "system:serviceaccount:kube-system:generic-garbage-collector"

// foregroundEvents reads a recorded foreground deletion (testdata/foreground, from the e2e test
// TestForegroundDeletionMetadataPatch on kube-apiserver v1.37): Deployment web is created, its
// controller updates its status, admin deletes it with propagationPolicy=Foreground (marked,
// finalizer foregroundDeletion), and once its ReplicaSet is gone the garbage collector's
// metadata-only client removes the finalizer with a merge patch, answered with a
// PartialObjectMetadata at the resourceVersion of the last status update.
func foregroundEvents(t *testing.T) []*auditv1.Event {
	t.Helper()
	events := readEvents(t, filepath.Join("testdata", "foreground", "audit.jsonl"))
	require.Equal(t, garbageCollector, events[len(events)-1].User.Username)
	return events
}

// gcPatch returns the garbage collector's patch among the events sent.
func gcPatch(t *testing.T, agg *aggregatortest.RecordingAggregator) *aggregator.Event {
	t.Helper()
	for _, ev := range agg.Events() {
		if u, _ := ev.Attributes.Get(aggregator.AttrUser); u == garbageCollector {
			return ev
		}
	}
	t.Fatal("the garbage collector's patch was not sent")
	return nil
}

func TestConsumerMetadataOnlyResponse(t *testing.T) {
	ctx := context.Background()
	events := foregroundEvents(t)

	t.Run("read for the object's metadata and diffed against the last version", func(t *testing.T) {
		agg := &aggregatortest.RecordingAggregator{}
		c, err := New(Config{}, Deps{Aggregator: agg})
		require.NoError(t, err)
		for _, ev := range events {
			c.Handle(ctx, "kind", ev)
		}
		gc := gcPatch(t, agg)
		assert.True(t, strings.HasSuffix(gc.Title, " (deleted: last finalizer removed)"), gc.Title)
		v, _ := gc.Attributes.Get(attrDeletion)
		assert.Equal(t, deletionCompleted, v)
		rv, _ := gc.Attributes.Get(aggregator.AttrNewRV)
		assert.Equal(t, "309", rv)
		assert.Equal(t, []string{`metadata.finalizers ["foregroundDeletion"] -> <none>`}, diffMessages(gc),
			"the same resourceVersion as the last status update, yet not a no-op")
		assert.Nil(t, gc.Object.Body, "metadata is not the object: no snapshot for the object cache and linkers")
		assert.Equal(t, "web", gc.Object.Name)
		assert.NotEmpty(t, gc.Object.UID)
	})

	t.Run("first write seen: the request's merge patch", func(t *testing.T) {
		agg := &aggregatortest.RecordingAggregator{}
		c, err := New(Config{}, Deps{Aggregator: agg})
		require.NoError(t, err)
		c.Handle(ctx, "kind", events[len(events)-1])
		gc := gcPatch(t, agg)
		assert.True(t, strings.HasSuffix(gc.Title, " (deleted: last finalizer removed)"), gc.Title)
		require.Len(t, gc.Logs, 2)
		op, _ := gc.Logs[0].Attributes.Get(diff.AttrOp)
		assert.Equal(t, objdiff.OpRequestPatch, op)
		assert.Contains(t, gc.Logs[0].Message, "no previous version seen")
		assert.Equal(t, "metadata.finalizers <unknown> -> <none>", gc.Logs[1].Message,
			"the resourceVersion precondition is not a change")
	})

	t.Run("the informer join stands aside when the stream knows the version before", func(t *testing.T) {
		c, agg, _ := newJoinConsumer(t, InformerJoinConfig{})
		for _, ev := range events[:len(events)-1] {
			c.Handle(ctx, "kind", ev)
		}
		c.Handle(ctx, "kind", events[len(events)-1])
		gc := gcPatch(t, agg)
		assert.Equal(t, []string{`metadata.finalizers ["foregroundDeletion"] -> <none>`}, diffMessages(gc))
	})
}
