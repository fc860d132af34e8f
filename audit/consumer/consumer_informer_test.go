package consumer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/telemetry"
)

func deployKey(name, rv string) changes.RecordKey {
	return changes.RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func replicasChange(name, base, rv string) changes.Record {
	return changes.Record{Key: deployKey(name, rv), Kind: changes.KindChange, BaseRV: base, Time: time.Now(),
		Changes: []objdiff.Change{{Path: "spec.replicas", Op: objdiff.OpReplace, Old: json.RawMessage("2"), New: json.RawMessage("4")}}}
}

func newJoinConsumer(t *testing.T, cfg InformerJoinConfig) (*Consumer, *aggregatortest.RecordingAggregator, *changes.Cache) {
	t.Helper()
	return newJoinConsumerOver(t, cfg, func(c *changes.Cache) InformerDiffs { return c })
}

// newJoinConsumerOver is newJoinConsumer with the consumer reading the cache through src.
func newJoinConsumerOver(t *testing.T, cfg InformerJoinConfig, src func(*changes.Cache) InformerDiffs) (*Consumer, *aggregatortest.RecordingAggregator, *changes.Cache) {
	t.Helper()
	agg := &aggregatortest.RecordingAggregator{}
	cache, err := changes.NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	c, err := New(Config{InformerJoin: cfg}, Deps{Aggregator: agg, InformerDiffs: src(cache)})
	require.NoError(t, err)
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
	cache.Put(changes.Record{Key: deployKey("old", "9"), Kind: changes.KindDeletion, Snapshot: []byte(`{"kind":"Deployment"}`), Time: now})

	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("d1", "delete", "old", "", now))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p1", "patch", "web", "", now))
	evs := agg.Events()
	require.Len(t, evs, 3, "nothing is held when the record is there or cannot be found")

	assert.Equal(t, []string{"spec.replicas 2 -> 4"}, diffMessages(evs[0]))
	attrs := attrMap(evs[0].Attributes)
	assert.Equal(t, "5", attrs[diff.AttrBaseRV])
	assert.Equal(t, "6", attrs[aggregator.AttrNewRV])
	assert.NotEmpty(t, attrs[attrInformerLatency])

	require.Len(t, logsOfType(evs[1], aggregator.LogTypeSnapshot), 1)
	assert.Equal(t, `{"kind":"Deployment"}`, evs[1].Logs[0].Message)

	// The patch names no resourceVersion: it is joined by time, and the only change since the
	// request was taken by the update.
	assert.Equal(t, []string{"diff unavailable: the informer recorded no change of this object since the request that no other write took"}, diffMessages(evs[2]))
}

func TestConsumerInformerJoinNotStartedOrOld(t *testing.T) {
	c, agg, _ := newJoinConsumer(t, InformerJoinConfig{})
	ctx := context.Background()
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", time.Now()))
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "update", "web", "5", time.Now().Add(-time.Hour)))
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
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", consumerEvent())                                                              // another object: a body, the stream diff
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "delete", "other", "", now.Add(-time.Hour))) // another object, too old to wait
	require.Len(t, agg.Events(), 2, "the held event blocks nothing")

	cache.Put(replicasChange("web", "5", "6"))
	require.Eventually(t, func() bool { return len(agg.Events()) == 3 }, 5*time.Second, time.Millisecond)
	held := agg.Events()[2]
	assert.Equal(t, "u1/ResponseComplete", held.ID)
	assert.Equal(t, []string{"spec.replicas 2 -> 4"}, diffMessages(held))
}

func TestConsumerInformerJoinDeadlineAndBounds(t *testing.T) {
	c, agg, _ := newJoinConsumer(t, InformerJoinConfig{Wait: 50 * time.Millisecond, Interval: 5 * time.Millisecond, MaxPending: 1})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	now := time.Now()
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "update", "web2", "7", now))
	evs := agg.Events()
	require.Len(t, evs, 1, "the second one does not fit")
	assert.Equal(t, []string{"diff unavailable: too many events waiting for informer diffs"}, diffMessages(evs[0]))

	require.Eventually(t, func() bool { return len(agg.Events()) == 2 }, 5*time.Second, time.Millisecond)
	msgs := diffMessages(agg.Events()[1])
	require.Len(t, msgs, 1)
	assert.True(t, strings.HasPrefix(msgs[0], "diff unavailable: the informer did not see this update within"), msgs[0])

	require.NoError(t, c.Stop(ctx))

	// Stop sends what is still held (a Wait long enough that only Stop can end it).
	c, agg, _ = newJoinConsumer(t, InformerJoinConfig{Wait: time.Minute, Interval: 5 * time.Millisecond})
	require.NoError(t, c.Start(ctx))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("d1", "delete", "web", "", time.Now()))
	require.Empty(t, agg.Events())
	require.NoError(t, c.Stop(ctx))
	evs = agg.Events()
	require.Len(t, evs, 1)
	assert.Equal(t, []string{"diff unavailable: shutting down before the informer saw this version"}, diffMessages(evs[0]))
	require.NoError(t, c.Stop(ctx), "stop twice")
}

func TestConsumerInformerJoinSkipsBodies(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{})
	cache.Put(replicasChange("web", "41", "42"))
	c.Handle(context.Background(), "c1", consumerEvent()) // has the response object: the stream diff
	evs := agg.Events()
	require.Len(t, evs, 1)
	assert.NotContains(t, diffMessages(evs[0]), "spec.replicas 2 -> 4")
	assert.Empty(t, attrMap(evs[0].Attributes)[attrInformerLatency])
}

func TestInformerJoinConfigValidate(t *testing.T) {
	require.Error(t, Config{InformerJoin: InformerJoinConfig{Wait: -1}}.Validate())
	require.NoError(t, Config{}.Validate())
}

func creation(name, rv, uid string, at time.Time) changes.Record {
	return changes.Record{Key: deployKey(name, rv), Kind: changes.KindCreation, UID: uid, Time: at,
		Snapshot: []byte(`{"kind":"Deployment","metadata":{"name":"` + name + `","uid":"` + uid + `"}}`)}
}

func change(name, base, rv, path, old, new string, at time.Time) changes.Record {
	return changes.Record{Key: deployKey(name, rv), Kind: changes.KindChange, BaseRV: base, Time: at,
		Changes: []objdiff.Change{{Path: path, Op: objdiff.OpReplace, Old: json.RawMessage(old), New: json.RawMessage(new)}}}
}

// A Metadata-level create carries the informer's creation snapshot: the first creation of the
// object seen since the request, not an earlier object's of the same name.
func TestConsumerInformerJoinCreate(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 10 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	now := time.Now()
	cache.Put(creation("web", "3", "uid-old", now.Add(-time.Minute))) // an earlier object named web
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })

	c.Handle(ctx, "c1", auditfixture.MetadataEvent("c1", "create", "web", "", now))
	require.Empty(t, agg.Events(), "held: the earlier object's creation is not this one")
	cache.Put(creation("web", "9", "uid-new", now.Add(20*time.Millisecond)))
	require.Eventually(t, func() bool { return len(agg.Events()) == 1 }, 5*time.Second, time.Millisecond)
	ev := agg.Events()[0]
	snaps := logsOfType(ev, aggregator.LogTypeSnapshot)
	require.Len(t, snaps, 1)
	assert.Contains(t, snaps[0].Message, "uid-new")
	assert.Contains(t, snaps[0].Attributes, aggregator.Attr{Key: diff.AttrSnapshotKind, Value: "creation"})
	assert.Equal(t, "9", attrMap(ev.Attributes)[aggregator.AttrNewRV])

	// A second create of the same name (say, a retry that failed with AlreadyExists would not be
	// joined; this one succeeded after a delete) does not take the claimed creation again.
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("c2", "create", "web", "", now.Add(30*time.Millisecond)))
	require.Len(t, agg.Events(), 1)
	cache.Put(creation("web", "12", "uid-newer", now.Add(40*time.Millisecond)))
	require.Eventually(t, func() bool { return len(agg.Events()) == 2 }, 5*time.Second, time.Millisecond)
	assert.Contains(t, logsOfType(agg.Events()[1], aggregator.LogTypeSnapshot)[0].Message, "uid-newer")
}

// Metadata-level patches name no resourceVersion: each takes the first change of its object
// seen since the request that no other write took, in the order of the audit stream; status
// patches take status changes, patches of the object the others.
func TestConsumerInformerJoinPatchByTime(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 10 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	now := time.Now()

	// Nothing recorded yet: the first patch waits, the second waits behind it (no look-up).
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p1", "patch", "web", "", now))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p2", "patch", "web", "", now.Add(time.Millisecond)))
	st := auditfixture.MetadataEvent("s1", "patch", "web", "", now.Add(2*time.Millisecond))
	st.ObjectRef.Subresource = "status"
	c.Handle(ctx, "c1", st)
	require.Empty(t, agg.Events())

	// The informer records, in resourceVersion order: p1's change, a status change, p2's change.
	// The records arrive in another order than the patches: the status change first.
	cache.Put(change("web", "7", "8", "status.replicas", "1", "2", now.Add(15*time.Millisecond)))
	cache.Put(change("web", "6", "7", "spec.replicas", "1", "2", now.Add(10*time.Millisecond)))
	cache.Put(change("web", "8", "9", "spec.paused", "false", "true", now.Add(20*time.Millisecond)))
	require.Eventually(t, func() bool { return len(agg.Events()) == 3 }, 5*time.Second, time.Millisecond)
	got := map[string][]string{}
	for _, ev := range agg.Events() {
		got[ev.ID] = diffMessages(ev)
	}
	assert.Equal(t, map[string][]string{
		"p1/ResponseComplete": {"spec.replicas 1 -> 2"},
		"s1/ResponseComplete": {"status.replicas 1 -> 2"},
		"p2/ResponseComplete": {"spec.paused false -> true"},
	}, got)

	// An update naming its resourceVersion claims its change: a later patch does not take it.
	cache.Put(change("web", "9", "10", "spec.replicas", "2", "3", time.Now()))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "9", time.Now()))
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p3", "patch", "web", "", time.Now().Add(-time.Second)))
	require.Len(t, agg.Events(), 4, "the update is joined at once; the patch waits")
	assert.Equal(t, []string{"spec.replicas 2 -> 3"}, diffMessages(agg.Events()[3]))
	cache.Put(change("web", "10", "11", "metadata.labels.app", `"a"`, `"b"`, time.Now()))
	require.Eventually(t, func() bool { return len(agg.Events()) == 5 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, "p3/ResponseComplete", agg.Events()[4].ID)
	assert.Equal(t, []string{"metadata.labels.app a -> b"}, diffMessages(agg.Events()[4]))
}

func TestClaimSetBounds(t *testing.T) {
	s := claimSet{max: 2, ttl: time.Minute, keys: map[changes.RecordKey]struct{}{}}
	now := time.Now()
	assert.Zero(t, s.add(deployKey("a", "1"), now))
	assert.Zero(t, s.add(deployKey("a", "1"), now), "twice")
	assert.Zero(t, s.add(deployKey("a", "2"), now))
	assert.Equal(t, 1, s.add(deployKey("a", "3"), now), "over the bound: the oldest is dropped")
	assert.False(t, s.has(deployKey("a", "1")))
	assert.True(t, s.has(deployKey("a", "2")))
	assert.Zero(t, s.add(deployKey("a", "4"), now.Add(2*time.Minute)), "expired claims go without counting")
	assert.False(t, s.has(deployKey("a", "2")))
	assert.False(t, s.has(deployKey("a", "3")))
	assert.True(t, s.has(deployKey("a", "4")))
}

// A write joined by time is not looked up while an earlier write of its object waits: a record
// must not go to the later write because the earlier one's record was late.
func TestConsumerInformerJoinByTimeWaitsBehind(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 400 * time.Millisecond, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	now := time.Now()
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", now)) // its record never comes
	c.Handle(ctx, "c1", auditfixture.MetadataEvent("p1", "patch", "web", "", now.Add(time.Millisecond)))
	cache.Put(change("web", "6", "7", "spec.paused", "false", "true", now.Add(10*time.Millisecond)))
	require.Never(t, func() bool { return len(agg.Events()) > 0 }, 100*time.Millisecond, 5*time.Millisecond,
		"the patch waits behind the update although a change is there")
	evs := waitEvents(t, agg, 2)
	assert.Equal(t, "u1/ResponseComplete", evs[0].ID)
	require.Len(t, diffMessages(evs[0]), 1)
	assert.Contains(t, diffMessages(evs[0])[0], "diff unavailable")
	assert.Equal(t, "p1/ResponseComplete", evs[1].ID)
	assert.Equal(t, []string{"spec.paused false -> true"}, diffMessages(evs[1]))
}

func waitEvents(t *testing.T, agg *aggregatortest.RecordingAggregator, n int) []*aggregator.Event {
	t.Helper()
	require.Eventually(t, func() bool { return len(agg.Events()) >= n }, 5*time.Second, time.Millisecond)
	return agg.Events()
}

// TestConsumerSettleWaitsForHeldEvents: Settle returns once the events held when it was called
// reached the aggregator (their diff arrived, or their deadline passed), and fails when its
// context ends first; a queue runs it before syncing the sinks for a batch.
func TestConsumerSettleWaitsForHeldEvents(t *testing.T) {
	c, agg, cache := newJoinConsumer(t, InformerJoinConfig{Wait: 10 * time.Second, Interval: 5 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c.Stop(ctx)) })
	require.NoError(t, c.Settle(ctx), "nothing held")

	c.Handle(ctx, "c1", auditfixture.MetadataEvent("u1", "update", "web", "5", time.Now()))
	require.Empty(t, agg.Events(), "held")
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Settle(short), context.DeadlineExceeded, "still held")

	settled := make(chan error, 1)
	go func() { settled <- c.Settle(ctx) }()
	require.Never(t, func() bool { return len(settled) > 0 }, 20*time.Millisecond, time.Millisecond,
		"settled while the event is held")
	cache.Put(replicasChange("web", "5", "6"))
	select {
	case err := <-settled:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Settle did not return once the event was sent")
	}
	require.Len(t, agg.Events(), 1, "sent before Settle returned")

	// Past its deadline, an event is sent without its diff, and Settle returns.
	c2, agg2, _ := newJoinConsumer(t, InformerJoinConfig{Wait: 100 * time.Millisecond, Interval: 5 * time.Millisecond})
	require.NoError(t, c2.Start(ctx))
	t.Cleanup(func() { require.NoError(t, c2.Stop(ctx)) })
	c2.Handle(ctx, "c1", auditfixture.MetadataEvent("u2", "update", "web", "5", time.Now()))
	require.NoError(t, c2.Settle(ctx))
	require.Len(t, agg2.Events(), 1)
}
