package changes

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults for changescfg.CacheConfig.
const (
	defaultCacheEntries = 100_000
	defaultCacheBytes   = 64 << 20
	defaultCacheTTL     = 10 * time.Minute
)

// withDefaults returns c with zero fields set to their defaults.
func withDefaults(c changescfg.CacheConfig) changescfg.CacheConfig {
	if c.MaxEntries == 0 {
		c.MaxEntries = defaultCacheEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultCacheBytes
	}
	if c.TTL == 0 {
		c.TTL = defaultCacheTTL
	}
	return c
}

// RecordKey names one version of one object.
type RecordKey struct {
	Cluster, Group, Resource, Namespace, Name string
	ResourceVersion                           string
}

func (k RecordKey) ObjectKey() aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: k.Cluster, Group: k.Group, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
}

// RecordKind says what a Record holds.
type RecordKind uint8

// Record kinds.
const (
	// KindChange: the changes from version BaseRV to Key.ResourceVersion.
	KindChange RecordKind = iota + 1
	// KindCreation: a creation snapshot.
	KindCreation
	// KindDeletion: a deletion snapshot, taken when deletionTimestamp was first set (Changes then
	// holds the changes of that write too) or when the object disappeared (Final).
	KindDeletion
)

// String names the kind as in diff.AttrSnapshotKind.
func (k RecordKind) String() string {
	switch k {
	case KindChange:
		return "change"
	case KindCreation:
		return "creation"
	case KindDeletion:
		return "deletion"
	}
	return "unknown"
}

// Record is what the informer saw at one resourceVersion of an object.
type Record struct {
	Key  RecordKey
	Kind RecordKind
	UID  string
	// BaseRV is the resourceVersion the changes are computed against (empty for snapshots
	// without a previous version).
	BaseRV  string
	Changes []objdiff.Change
	// Snapshot is the stripped, redacted object (creation and deletion records).
	Snapshot []byte
	// Final marks a deletion record of the object's disappearance (not the deletion start).
	Final bool
	// Time is when the informer saw the version.
	Time time.Time
}

// Size is the approximate memory a record takes, for the bounds of the stores.
func (r *Record) Size() int64 {
	n := int64(len(r.Snapshot)) + 256 + int64(len(r.Key.Name)+len(r.Key.Namespace)+len(r.BaseRV)+len(r.UID))
	for _, c := range r.Changes {
		n += int64(len(c.Path)+len(c.Old)+len(c.New)) + 64
	}
	return n
}

// Logs renders r as span logs, with the bounds of f (defaults for zero fields; a
// diff.StreamConfig gives its LogFormat).
func (r Record) Logs(at time.Time, f objdiff.LogFormat) []aggregator.Log {
	f = f.WithDefaults()
	var logs []aggregator.Log
	switch r.Kind {
	case KindCreation, KindDeletion:
		logs = append(logs, f.SnapshotLog(at, r.Kind.String(), "informer", r.Key.ResourceVersion, r.Snapshot))
		if len(r.Changes) > 0 {
			logs = append(logs, f.ChangeLogs(at, r.Changes)...)
		}
	case KindChange:
		if len(r.Changes) == 0 {
			return []aggregator.Log{objdiff.NoteLog(at, diff.OpNone, "no change besides bookkeeping fields (resourceVersion "+r.BaseRV+" -> "+r.Key.ResourceVersion+")")}
		}
		logs = f.ChangeLogs(at, r.Changes)
	}
	return logs
}

// Store stores what the informers recorded, for the audit consumer. The Informer Puts records
// (only the leading replica does, with leader election); the consumer Finds the record of each
// body-less audited write. Neither call waits on the network: the consumer waits for a record
// that is not there yet by calling Find again until its own deadline, while it goes on with other
// events (audit consumer.Deps.InformerDiffs).
//
// *Cache (one process) and *etcdstore.Store (shared by replicas through etcd) implement it.
type Store interface {
	// Put records rec. It does not block for long: a store that writes over the network queues
	// the write (bounded) and counts what it drops.
	Put(rec Record)
	// Find returns the record that describes an audited write, if known now. It never blocks.
	Find(q Query) (Record, bool)
}

// Query asks a Cache for the record of one audited write.
type Query struct {
	Object aggregator.ObjectKey
	UID    string
	// Verb is create, update, patch or delete.
	Verb string
	// Subresource is the write's subresource: "" or "status" (see Find).
	Subresource string
	// ResponseRV is the resourceVersion the write produced, when known.
	ResponseRV string
	// RequestRV is the audit objectRef.resourceVersion: the version an update was based on.
	RequestRV string
	// Since is when the request was received: a deletion record older than that belongs to an
	// earlier object of the same name; a record picked by time (see Find) is not older.
	Since time.Time
	// Claimed, when set, reports the records already attributed to other audit events: Find
	// skips them when it picks a record by time.
	Claimed func(RecordKey) bool
}

// Cache is a bounded in-memory store of informer Records keyed by object and
// resourceVersion, with a TTL. It also finds a change by the version it was based on and the
// latest deletion of an object. Safe for concurrent use.
type Cache struct {
	cfg changescfg.CacheConfig
	now func() time.Time

	mu      sync.Mutex
	order   *list.List // of *cacheEntry, oldest first
	byKey   map[RecordKey]*list.Element
	byBase  map[RecordKey]RecordKey // (object, base RV) -> record key
	deleted map[aggregator.ObjectKey]RecordKey
	// byObject lists each object's records in the order they were put.
	byObject map[aggregator.ObjectKey][]RecordKey
	bytes    int64

	evictions metric.Int64Counter
	reasonOpt map[string]metric.MeasurementOption
}

type cacheEntry struct {
	rec   Record
	added time.Time
	size  int64
}

// NewCache builds a Cache; ts gives its meter provider (may be unset).
func NewCache(cfg changescfg.CacheConfig, ts telemetry.Settings) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{
		cfg: withDefaults(cfg), now: time.Now, order: list.New(),
		byKey: map[RecordKey]*list.Element{}, byBase: map[RecordKey]RecordKey{}, deleted: map[aggregator.ObjectKey]RecordKey{},
		byObject: map[aggregator.ObjectKey][]RecordKey{}, reasonOpt: map[string]metric.MeasurementOption{},
	}
	reasons := []string{"expired", "entries", "bytes", "replaced", "removed"}
	reasonSets := instrument.Sets("reason", reasons...)
	for i, r := range reasons {
		c.reasonOpt[r] = metric.WithAttributeSet(reasonSets[i])
	}
	meter := instrument.NewMeter(ts, meterScope)
	c.evictions = meter.Counter("kelemetry.diff.informer.cache.evictions",
		"Informer diff records dropped from the change cache, by reason (expired, entries, bytes, replaced, removed).", "{record}", reasonSets...)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("diff change cache: %w", err)
	}
	return c, nil
}

// meterScope is the instrumentation scope of the diff packages' metrics.
const meterScope = "github.com/kelemetry/kelemetry/diff"

// Put stores rec, replacing a record with the same key.
func (c *Cache) Put(rec Record) {
	now := c.now()
	e := &cacheEntry{rec: rec, added: now, size: rec.Size()}
	if e.size > c.cfg.MaxBytes {
		c.evictions.Add(context.Background(), 1, c.reasonOpt["bytes"])
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	if old, ok := c.byKey[rec.Key]; ok {
		c.removeLocked(old)
		c.evictions.Add(context.Background(), 1, c.reasonOpt["replaced"])
	}
	for c.order.Len() >= c.cfg.MaxEntries {
		c.removeLocked(c.order.Front())
		c.evictions.Add(context.Background(), 1, c.reasonOpt["entries"])
	}
	for c.bytes+e.size > c.cfg.MaxBytes && c.order.Len() > 0 {
		c.removeLocked(c.order.Front())
		c.evictions.Add(context.Background(), 1, c.reasonOpt["bytes"])
	}
	c.byKey[rec.Key] = c.order.PushBack(e)
	c.bytes += e.size
	obj := rec.Key.ObjectKey()
	c.byObject[obj] = append(c.byObject[obj], rec.Key)
	if rec.Kind == KindChange && rec.BaseRV != "" {
		bk := rec.Key
		bk.ResourceVersion = rec.BaseRV
		c.byBase[bk] = rec.Key
	}
	if rec.Kind == KindDeletion {
		ok := rec.Key.ObjectKey()
		// Keep the deletion start: a final record of the same object does not replace it.
		if prev, had := c.byKey[c.deleted[ok]]; !had || !rec.Final || prev.Value.(*cacheEntry).rec.UID != rec.UID {
			c.deleted[ok] = rec.Key
		}
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	e := c.order.Remove(el).(*cacheEntry)
	c.bytes -= e.size
	delete(c.byKey, e.rec.Key)
	obj := e.rec.Key.ObjectKey()
	if keys := c.byObject[obj]; len(keys) <= 1 {
		delete(c.byObject, obj)
	} else if i := slices.Index(keys, e.rec.Key); i >= 0 {
		c.byObject[obj] = slices.Delete(keys, i, i+1)
	}
	if e.rec.Kind == KindChange && e.rec.BaseRV != "" {
		bk := e.rec.Key
		bk.ResourceVersion = e.rec.BaseRV
		if c.byBase[bk] == e.rec.Key {
			delete(c.byBase, bk)
		}
	}
	if e.rec.Kind == KindDeletion {
		if ok := e.rec.Key.ObjectKey(); c.deleted[ok] == e.rec.Key {
			delete(c.deleted, ok)
		}
	}
}

func (c *Cache) expireLocked(now time.Time) {
	for el := c.order.Front(); el != nil; el = c.order.Front() {
		if now.Sub(el.Value.(*cacheEntry).added) < c.cfg.TTL {
			return
		}
		c.removeLocked(el)
		c.evictions.Add(context.Background(), 1, c.reasonOpt["expired"])
	}
}

// Delete removes the record of key, if kept (an etcd-backed cache mirrors the removal of a key).
func (c *Cache) Delete(key RecordKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if ok {
		c.removeLocked(el)
		c.evictions.Add(context.Background(), 1, c.reasonOpt["removed"])
	}
	return ok
}

// Get returns the record of key, if kept and not expired.
func (c *Cache) Get(key RecordKey) (Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(key)
}

func (c *Cache) getLocked(key RecordKey) (Record, bool) {
	el, ok := c.byKey[key]
	if !ok {
		return Record{}, false
	}
	e := el.Value.(*cacheEntry)
	if c.now().Sub(e.added) >= c.cfg.TTL {
		return Record{}, false
	}
	return e.rec, true
}

// Find returns the record that describes an audited write, if known:
//   - the record at ResponseRV when given;
//   - for update and patch with a RequestRV, the change based on it;
//   - for update and patch without one (Metadata-level audit of a patch), the first change
//     picked by time, see below;
//   - for create, the first creation snapshot picked by time;
//   - for delete, the object's latest deletion record seen since Since (deletion start
//     preferred over the final removal), of the same UID when both are known.
//
// Picking by time: among the object's records of the wanted kind that the informer saw at or
// after Since, of the same UID when both are known and not Claimed, the one of the lowest
// resourceVersion (the informer sees an object's versions in resourceVersion order, so this is
// the first version written after the request was received that no other audited write took).
// For changes, a write on the status subresource takes only a change that touches status (or
// changes nothing but bookkeeping fields), and a write on the object itself only one that
// touches something besides status: a status write cannot change anything else, and on
// resources with a status subresource a write on the object cannot change status.
//
// The rule is sound when the object's writes are audited and joined in the order they were
// received, which the audit consumer does per object. Its limits: a write that changed nothing
// (a no-op patch; the API server then writes no new version) takes the next write's change if
// that one was not claimed yet; concurrent writes to one object may be swapped; a write on the
// object of a resource without a status subresource that changes only status is not found;
// a version the informer did not record (object too large, store full) makes the write take the
// next one. Clock skew between the API server and this process beyond the caller's slack on
// Since hides the record.
func (c *Cache) Find(q Query) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	key := RecordKey{Cluster: q.Object.Cluster, Group: q.Object.Group, Resource: q.Object.Resource,
		Namespace: q.Object.Namespace, Name: q.Object.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if q.ResponseRV != "" {
		key.ResourceVersion = q.ResponseRV
		return c.getLocked(key)
	}
	switch q.Verb {
	case "create":
		return c.pickLocked(q, KindCreation)
	case "update", "patch":
		if q.RequestRV == "" {
			return c.pickLocked(q, KindChange)
		}
		key.ResourceVersion = q.RequestRV
		rk, ok := c.byBase[key]
		if !ok {
			return Record{}, false
		}
		return c.getLocked(rk)
	case "delete":
		rk, ok := c.deleted[q.Object]
		if !ok {
			return Record{}, false
		}
		rec, ok := c.getLocked(rk)
		if !ok || rec.Time.Before(q.Since) || (q.UID != "" && rec.UID != "" && q.UID != rec.UID) {
			return Record{}, false
		}
		return rec, true
	}
	return Record{}, false
}

// pickLocked picks the first record of kind by time (see Find).
func (c *Cache) pickLocked(q Query, kind RecordKind) (Record, bool) {
	var best Record
	found := false
	for _, k := range c.byObject[q.Object] {
		rec, ok := c.getLocked(k)
		if !ok || rec.Kind != kind || rec.Time.Before(q.Since) || (q.UID != "" && rec.UID != "" && q.UID != rec.UID) {
			continue
		}
		if kind == KindChange && !matchesSubresource(rec.Changes, q.Subresource) {
			continue
		}
		if q.Claimed != nil && q.Claimed(rec.Key) {
			continue
		}
		if !found || rvLess(rec.Key.ResourceVersion, best.Key.ResourceVersion) {
			best, found = rec, true
		}
	}
	return best, found
}

// matchesSubresource reports whether changes can come from a write on subresource ("" or
// "status"): see Find.
func matchesSubresource(changes []objdiff.Change, subresource string) bool {
	if len(changes) == 0 {
		return true
	}
	for _, ch := range changes {
		if isStatusPath(ch.Path) == (subresource == "status") {
			return true
		}
	}
	return false
}

func isStatusPath(p string) bool {
	return p == "status" || strings.HasPrefix(p, "status.") || strings.HasPrefix(p, "status[")
}

// rvLess orders resourceVersions: numerically when both are numbers (etcd revisions, as
// kube-apiserver writes them), else as strings.
func rvLess(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

// Len is the number of records kept; Bytes their approximate size.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes is the approximate size of the records kept.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// DeletionQuery selects the deletions of one resource in one namespace (Namespace "" for
// cluster-scoped resources) seen in a time range, as a collection delete makes them.
type DeletionQuery struct {
	Cluster, Group, Resource, Namespace string
	// Since and Until bound when the informer saw the deletion (both inclusive).
	Since, Until time.Time
	// Max bounds the records returned (0: no bound).
	Max int
}

// Deletions returns the latest deletion record of each object q selects (the deletion start,
// when deletionTimestamp was set, preferred over the object's removal), ordered by name, at most
// q.Max of them; total is how many matched. It scans the deletions kept, without waiting.
func (c *Cache) Deletions(q DeletionQuery) (recs []Record, total int) {
	if c == nil {
		return nil, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for obj, rk := range c.deleted {
		if obj.Cluster != q.Cluster || obj.Group != q.Group || obj.Resource != q.Resource || obj.Namespace != q.Namespace {
			continue
		}
		rec, ok := c.getLocked(rk)
		if !ok || rec.Time.Before(q.Since) || rec.Time.After(q.Until) {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(a.Key.Name, b.Key.Name) })
	total = len(recs)
	if q.Max > 0 && len(recs) > q.Max {
		clear(recs[q.Max:])
		recs = recs[:q.Max]
	}
	return recs, total
}

// Finalized returns the record of the object's removal (a Final deletion) seen since since, when
// the informer saw the object marked for deletion before (a deletion start of the same UID is
// kept): the removal that the write dropping the object's last finalizer caused.
func (c *Cache) Finalized(obj aggregator.ObjectKey, since time.Time) (Record, bool) {
	if c == nil {
		return Record{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var final Record
	found := false
	marked := map[string]bool{}
	for _, k := range c.byObject[obj] {
		rec, ok := c.getLocked(k)
		if !ok || rec.Kind != KindDeletion {
			continue
		}
		if !rec.Final {
			marked[rec.UID] = true
			continue
		}
		if !rec.Time.Before(since) && (!found || rec.Time.Before(final.Time)) {
			final, found = rec, true
		}
	}
	if !found || !marked[final.UID] {
		return Record{}, false
	}
	return final, true
}
