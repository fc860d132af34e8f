package changes

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/telemetry"
)

func depKey(name, rv string) RecordKey {
	return RecordKey{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default", Name: name, ResourceVersion: rv}
}

func changeAt(name, base, rv, path string, at time.Time) Record {
	return Record{Key: depKey(name, rv), Kind: KindChange, BaseRV: base, Time: at,
		Changes: []objdiff.Change{{Path: path, Op: objdiff.OpReplace, Old: json.RawMessage("1"), New: json.RawMessage("2")}}}
}

func TestChangeCacheFindByTime(t *testing.T) {
	c, err := NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	t0 := time.Now()
	obj := depKey("web", "").ObjectKey()
	// Put out of resourceVersion order; "10" sorts before "9" as a string, not as a number.
	c.Put(changeAt("web", "9", "10", "spec.replicas", t0.Add(3*time.Millisecond)))
	c.Put(changeAt("web", "8", "9", "status.replicas", t0.Add(2*time.Millisecond)))
	c.Put(changeAt("web", "7", "8", "spec.paused", t0.Add(time.Millisecond)))
	c.Put(changeAt("web", "1", "2", "spec.paused", t0.Add(-time.Minute))) // before the request
	c.Put(changeAt("other", "7", "8", "spec.paused", t0))
	c.Put(Record{Key: depKey("web", "1"), Kind: KindCreation, UID: "u1", Time: t0.Add(-time.Minute)})
	c.Put(Record{Key: depKey("web", "11"), Kind: KindCreation, UID: "u2", Time: t0.Add(5 * time.Millisecond)})

	claimed := map[RecordKey]bool{}
	q := Query{Object: obj, Verb: "patch", Since: t0, Claimed: func(k RecordKey) bool { return claimed[k] }}
	pick := func(q Query) string {
		rec, ok := c.Find(q)
		if !ok {
			return ""
		}
		return rec.Key.ResourceVersion
	}
	assert.Equal(t, "8", pick(q), "the lowest resourceVersion since the request")
	claimed[depKey("web", "8")] = true
	assert.Equal(t, "10", pick(q), "claimed ones are skipped, status-only changes too")
	q.Subresource = "status"
	assert.Equal(t, "9", pick(q), "a status patch takes a status change")
	claimed[depKey("web", "9")] = true
	assert.Equal(t, "", pick(q))
	q.Subresource = ""
	q.Since = t0.Add(10 * time.Millisecond)
	assert.Equal(t, "", pick(q), "nothing seen since")

	cq := Query{Object: obj, Verb: "create", Since: t0}
	assert.Equal(t, "11", pick(cq))
	cq.UID = "u1"
	assert.Equal(t, "", pick(cq), "another UID")
	cq.UID, cq.Since = "", t0.Add(-2*time.Minute)
	assert.Equal(t, "1", pick(cq))

	// With a request resourceVersion, the change based on it, claimed or not.
	assert.Equal(t, "9", pick(Query{Object: obj, Verb: "update", RequestRV: "8", Claimed: q.Claimed}))

	// Delete removes a record from every index.
	assert.True(t, c.Delete(depKey("web", "10")))
	assert.False(t, c.Delete(depKey("web", "10")))
	q.Since = t0
	assert.Equal(t, "", pick(q))
	assert.Equal(t, "", pick(Query{Object: obj, Verb: "update", RequestRV: "9"}))
	assert.Equal(t, 6, c.Len())
}

func TestRVLess(t *testing.T) {
	assert.True(t, rvLess("9", "10"))
	assert.False(t, rvLess("10", "9"))
	assert.True(t, rvLess("a", "b"), "not numbers: as strings")
}

func podKey(name, rv string) RecordKey {
	return RecordKey{Cluster: "c1", Resource: "pods", Namespace: "default", Name: name, ResourceVersion: rv}
}

func TestChangeCacheBounds(t *testing.T) {
	cache, err := NewCache(changescfg.CacheConfig{MaxEntries: 3, TTL: time.Minute}, telemetry.Settings{})
	require.NoError(t, err)
	now := time.Unix(1000, 0)
	cache.now = func() time.Time { return now }
	for i := range 5 {
		cache.Put(Record{Key: podKey("a", fmt.Sprint(i+1)), Kind: KindChange, BaseRV: fmt.Sprint(i)})
	}
	assert.Equal(t, 3, cache.Len())
	_, ok := cache.Get(podKey("a", "2"))
	assert.False(t, ok, "oldest evicted")
	_, ok = cache.Find(Query{Object: podKey("a", "").ObjectKey(), Verb: "patch", RequestRV: "1"})
	assert.False(t, ok, "index entry evicted with its record")
	rec, ok := cache.Find(Query{Object: podKey("a", "").ObjectKey(), Verb: "patch", RequestRV: "4"})
	require.True(t, ok)
	assert.Equal(t, "5", rec.Key.ResourceVersion)
	now = now.Add(time.Minute)
	_, ok = cache.Get(podKey("a", "5"))
	assert.False(t, ok, "expired")
	cache.Put(Record{Key: podKey("b", "9"), Kind: KindCreation})
	assert.Equal(t, 1, cache.Len(), "expired records dropped on put")

	small, err := NewCache(changescfg.CacheConfig{MaxBytes: 1000}, telemetry.Settings{})
	require.NoError(t, err)
	for i := range 10 {
		small.Put(Record{Key: podKey("a", fmt.Sprint(i)), Kind: KindCreation, Snapshot: make([]byte, 300)})
	}
	assert.LessOrEqual(t, small.Bytes(), int64(1000))
	assert.Positive(t, small.Len())
}

func TestRecordLogs(t *testing.T) {
	rec := Record{Key: podKey("a", "2"), Kind: KindChange, BaseRV: "1",
		Changes: []objdiff.Change{{Path: "spec.replicas", Op: objdiff.OpReplace, Old: json.RawMessage("2"), New: json.RawMessage("4")}}}
	logs := rec.Logs(time.Unix(1, 0), objdiff.LogFormat{})
	require.Len(t, logs, 1)
	assert.Equal(t, aggregator.LogTypeDiff, logs[0].Type)
	assert.Equal(t, "spec.replicas 2 -> 4", logs[0].Message)
	rec = Record{Key: podKey("a", "3"), Kind: KindDeletion, Snapshot: []byte(`{"kind":"Pod"}`)}
	logs = rec.Logs(time.Unix(1, 0), objdiff.LogFormat{})
	require.Len(t, logs, 1)
	assert.Equal(t, aggregator.LogTypeSnapshot, logs[0].Type)
	assert.Contains(t, logs[0].Attributes, aggregator.Attr{Key: diff.AttrSnapshotKind, Value: "deletion"})
	rec = Record{Key: podKey("a", "4"), Kind: KindChange, BaseRV: "3"}
	logs = rec.Logs(time.Unix(1, 0), objdiff.LogFormat{})
	require.Len(t, logs, 1)
	assert.Contains(t, logs[0].Attributes, aggregator.Attr{Key: diff.AttrOp, Value: diff.OpNone})
}

// TestChangeCacheDeletions: a collection delete's look-up finds the deletions of one resource in
// one namespace in a time range, the deletion start preferred, ordered and bounded.
func TestChangeCacheDeletions(t *testing.T) {
	c, err := NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	t0 := time.Now()
	del := func(k RecordKey, uid string, final bool, at time.Time) Record {
		return Record{Key: k, Kind: KindDeletion, UID: uid, Final: final, Time: at}
	}
	c.Put(del(depKey("b", "10"), "ub", true, t0.Add(time.Millisecond)))
	c.Put(del(depKey("a", "11"), "ua", false, t0.Add(2*time.Millisecond))) // deletion start
	c.Put(del(depKey("a", "20"), "ua", true, t0.Add(time.Second)))         // its removal
	c.Put(del(depKey("old", "5"), "uo", true, t0.Add(-time.Minute)))       // before the range
	c.Put(changeAt("c", "1", "2", "spec.paused", t0))                      // not a deletion
	other := depKey("x", "12")
	other.Namespace = "other"
	c.Put(del(other, "ux", true, t0))

	q := DeletionQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "default",
		Since: t0.Add(-time.Second), Until: t0.Add(2 * time.Second)}
	recs, total := c.Deletions(q)
	require.Equal(t, 2, total)
	require.Len(t, recs, 2)
	assert.Equal(t, depKey("a", "11"), recs[0].Key, "the deletion start")
	assert.Equal(t, depKey("b", "10"), recs[1].Key)

	q.Max = 1
	recs, total = c.Deletions(q)
	assert.Equal(t, 2, total)
	require.Len(t, recs, 1)
	assert.Equal(t, "a", recs[0].Key.Name)

	q.Max, q.Until = 0, t0
	recs, _ = c.Deletions(q)
	assert.Empty(t, recs, "seen after the range")
	var nilCache *Cache
	recs, total = nilCache.Deletions(q)
	assert.Empty(t, recs)
	assert.Zero(t, total)
}

// TestChangeCacheFinalized: the removal of an object marked for deletion is found for the write
// that removed its last finalizer; an object never marked, or removed before the write, is not.
func TestChangeCacheFinalized(t *testing.T) {
	c, err := NewCache(changescfg.CacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	t0 := time.Now()
	c.Put(Record{Key: depKey("held", "11"), Kind: KindDeletion, UID: "u1", Time: t0})
	c.Put(Record{Key: depKey("held", "20"), Kind: KindDeletion, UID: "u1", Final: true, Time: t0.Add(5 * time.Second)})
	c.Put(Record{Key: depKey("plain", "21"), Kind: KindDeletion, UID: "u2", Final: true, Time: t0.Add(5 * time.Second)})

	rec, ok := c.Finalized(depKey("held", "").ObjectKey(), t0.Add(4*time.Second))
	require.True(t, ok)
	assert.Equal(t, "20", rec.Key.ResourceVersion)
	_, ok = c.Finalized(depKey("held", "").ObjectKey(), t0.Add(6*time.Second))
	assert.False(t, ok, "removed before the write")
	_, ok = c.Finalized(depKey("plain", "").ObjectKey(), t0)
	assert.False(t, ok, "never marked for deletion")
}
