package objdiff

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Write is one successful write seen in the audit stream.
type Write struct {
	// Object names the object (the parent object for a subresource).
	Object aggregator.ObjectRef
	// Verb is the request verb: create, update, patch, delete or deletecollection.
	Verb        string
	Subresource string
	// RequestResourceVersion is the objectRef's resourceVersion: for an update, the version it
	// was based on.
	RequestResourceVersion string
	// Request is the request body (used for pods/binding, whose response is a Status).
	Request []byte
	// Response is the response body; IsObject says it is the object itself (not a Status, a
	// Scale, ...), and ResourceVersion is then its resourceVersion.
	Response []byte
	// Snapshot is Differ.Snapshot of Response (the Stream's Differ, with Object's resource),
	// when the caller already has it; it must not be modified afterwards.
	Snapshot []byte
	// SnapshotLayout is the Layout of Snapshot when the caller recorded it (see
	// Differ.SnapshotKnownLayout); the Stream may keep it, so it must not be modified
	// afterwards. Without it the Stream scans the snapshot itself.
	SnapshotLayout *Layout
	IsObject       bool
	// MetadataOnly says Response is the object's metadata only (a PartialObjectMetadata, what a
	// metadata-only client gets), and ResourceVersion is its resourceVersion; IsObject is then
	// false.
	MetadataOnly    bool
	ResourceVersion string
	// Final says the write completed the object's deletion (it removed the last finalizer of an
	// object marked for deletion): kube-apiserver answers with the object's last version as it
	// was removed, its resourceVersion unchanged, so an unchanged resourceVersion does not make
	// the write a no-op.
	Final bool
	// Time stamps the logs (the end of the request).
	Time time.Time
}

// Result is what a Stream adds to a write's span.
type Result struct {
	Logs       []aggregator.Log
	Attributes aggregator.Attrs
}

// Stream diffs consecutive versions of objects as the audit stream carries them: with
// RequestResponse-level auditing, each write's response is the new object. It keeps the last
// version of each object (stripped of managedFields, redacted) in a bounded LRU; it never waits.
//
// What a write gets (all logs have type aggregator.LogTypeDiff or LogTypeSnapshot):
//   - create: a creation snapshot (LogTypeSnapshot, the object as JSON without managedFields);
//   - update, patch (the object, or the status subresource): one LogTypeDiff log per change,
//     message "<path> <old> -> <new>" and attributes AttrPath, AttrOp, AttrOld, AttrNew; or one
//     note (AttrOp OpNone) for a no-op or a bookkeeping-only write; or one note (OpUnavailable)
//     when no previous version is known ("diff unavailable: no previous version seen"). A
//     patch whose previous version is unknown shows its request body instead when it is a merge
//     or strategic-merge patch: a note (OpRequestPatch) then one OpPatch change per field it
//     sets (old value <unknown>). A write answered with the object's metadata only
//     (MetadataOnly) is diffed as the last version seen with that metadata;
//   - patch or update of the scale subresource: the spec.replicas change, from the Scale
//     response and the last version seen;
//   - create of a pod's binding subresource: the spec.nodeName change, from the request;
//   - delete: a deletion snapshot: the response when it is the object (deletion pending on
//     finalizers or a grace period), else the last version seen. A later delete that returns the
//     object again (the final removal) gets a note pointing at that snapshot and the changes
//     since it, unless RepeatDeletionSnapshots.
//
// Writes of one object must be observed in order (the audit queue guarantees it); a version
// older than the one kept gets an OpUnavailable note. Safe for concurrent use.
type Stream struct {
	cfg    diff.StreamConfig
	format LogFormat
	differ *Differ
	cache  *versionCache
	logger *slog.Logger

	results   *instrument.FixedCounter
	evictions metric.Int64Counter
	resultIdx map[string]int // the point of each result in results
}

type version struct {
	rv   string
	body []byte // snapshot
	idx  *index // structural index of body, or nil
	// deleting: a deletion snapshot of this object was written (its deletion started).
	deleting bool
}

// Stream results, the result attribute of kelemetry.diff.stream.writes.
const (
	resultDiff        = "diff"
	resultNoop        = "noop"
	resultUnavailable = "unavailable"
	// resultRequestPatch: no previous version, the request's patch shown instead.
	resultRequestPatch = "request_patch"
	resultSnapshot     = "snapshot"
	resultSkipped      = "skipped"
	resultError        = "error"
	resultWarmed       = "warmed"
)

// NewStream builds a Stream; ts gives its logger and meter provider (either may be unset).
func NewStream(cfg diff.StreamConfig, ts telemetry.Settings) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	d, err := New(cfg.Compare)
	if err != nil {
		return nil, err
	}
	s := &Stream{cfg: cfg, format: FormatOf(cfg), differ: d, logger: ts.Log().With("component", "diff.stream"), resultIdx: map[string]int{}}
	meter := instrument.NewMeter(ts, meterScope)
	results := []string{resultDiff, resultNoop, resultUnavailable, resultRequestPatch, resultSnapshot, resultSkipped, resultError, resultWarmed}
	resultSets := make([]attribute.Set, len(results))
	for i, r := range results {
		s.resultIdx[r] = i
		resultSets[i] = attribute.NewSet(attribute.String("result", r))
	}
	s.results = meter.FixedCounter("kelemetry.diff.stream.writes",
		"Writes seen by the audit-stream diff, by result (diff, noop, unavailable, request_patch: no previous version, "+
			"the request's patch shown instead; snapshot, skipped, error; "+
			"warmed: replayed to rebuild state after a takeover).", "{write}", resultSets...)
	evictReasons := []string{evictObjects, evictBytes}
	evictSets := instrument.Sets("reason", evictReasons...)
	s.evictions = meter.Counter("kelemetry.diff.stream.evictions",
		"Object versions evicted from the audit-stream diff cache, by reason (objects, bytes).", "{object}", evictSets...)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("diff stream: %w", err)
	}
	evictOpt := map[string]metric.MeasurementOption{}
	for i, r := range evictReasons {
		evictOpt[r] = metric.WithAttributeSet(evictSets[i])
	}
	s.cache = newVersionCache(cfg.CacheSize, cfg.MaxBytes, func(reason string, n int64) {
		s.evictions.Add(context.Background(), n, evictOpt[reason])
	})
	return s, nil
}

// meterScope is the instrumentation scope of the diff packages' metrics.
const meterScope = "github.com/kelemetry/kelemetry/diff"

// Differ returns the stream's Differ.
func (s *Stream) Differ() *Differ { return s.differ }

// Knows reports whether a version of the object is kept.
func (s *Stream) Knows(key aggregator.ObjectKey) bool {
	if s == nil || s.cfg.Disabled {
		return false
	}
	_, ok := s.cache.Peek(key)
	return ok
}

// Len is the number of objects whose last version is kept.
func (s *Stream) Len() int { return s.cache.Len() }

// Bytes is the estimated heap of the kept versions, bounded by StreamConfig.MaxBytes.
func (s *Stream) Bytes() int64 { return s.cache.Bytes() }

// Observe records w and returns what its span should carry. It never blocks on anything but the
// cache lock.
func (s *Stream) Observe(ctx context.Context, w Write) Result {
	if s == nil || s.cfg.Disabled {
		return Result{}
	}
	res, result := s.observe(w)
	s.results.Add(s.resultIdx[result], 1)
	return res
}

func (s *Stream) observe(w Write) (Result, string) {
	key := w.Object.Key()
	gr := diff.Resource{Group: w.Object.Group, Resource: w.Object.Resource}
	switch w.Verb {
	case "create":
		if w.Subresource == "binding" {
			return s.binding(key, w)
		}
		if !w.IsObject || w.Subresource != "" {
			return Result{}, resultSkipped
		}
		snap, err := s.keep(key, gr, w, w.ResourceVersion)
		if err != nil {
			return s.unavailable(w, fmt.Sprintf("creation snapshot unavailable: %v", err)), resultError
		}
		return Result{Logs: []aggregator.Log{s.snapshotLog(w.Time, "creation", "response", w.ResourceVersion, snap)}}, resultSnapshot
	case "update", "patch":
		if w.Subresource == "scale" {
			return s.scale(key, w)
		}
		if w.MetadataOnly && w.Subresource == "" {
			return s.metadata(key, gr, w)
		}
		if !w.IsObject {
			return Result{}, resultSkipped
		}
		return s.update(key, gr, w)
	case "delete", "deletecollection":
		if w.Subresource != "" {
			return Result{}, resultSkipped
		}
		if w.IsObject {
			if prev, ok := s.cache.Peek(key); ok && prev.deleting && !s.cfg.RepeatDeletionSnapshots {
				r, result := s.update(key, gr, w)
				s.markDeleting(key)
				note := aggregator.Log{Time: w.Time, Type: aggregator.LogTypeDiff,
					Message:    "deletion snapshot taken at resourceVersion " + shownRV(prev.rv) + "; changes since:",
					Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: diff.OpNone}, {Key: diff.AttrSnapshotKind, Value: "deletion"}, {Key: diff.AttrSnapshotRV, Value: prev.rv}}}
				r.Logs = append([]aggregator.Log{note}, r.Logs...)
				return r, result
			}
			snap, err := s.keep(key, gr, w, w.ResourceVersion)
			if err != nil {
				return s.unavailable(w, fmt.Sprintf("deletion snapshot unavailable: %v", err)), resultError
			}
			s.markDeleting(key)
			return Result{Logs: []aggregator.Log{s.snapshotLog(w.Time, "deletion", "response", w.ResourceVersion, snap)}}, resultSnapshot
		}
		prev, ok := s.cache.Peek(key)
		if !ok {
			return s.unavailable(w, "deletion snapshot unavailable: no previous version seen"), resultUnavailable
		}
		s.cache.Remove(key)
		return Result{Logs: []aggregator.Log{s.snapshotLog(w.Time, "deletion", "last_seen", prev.rv, prev.body)}}, resultSnapshot
	default:
		return Result{}, resultSkipped
	}
}

// keep snapshots body and stores it as key's last version (unless too large).
func (s *Stream) keep(key aggregator.ObjectKey, gr diff.Resource, w Write, rv string) ([]byte, error) {
	snap, err := s.snapshot(gr, w)
	if err != nil {
		s.cache.Remove(key)
		return nil, err
	}
	s.storeIndexed(key, rv, snap, givenIndex(w, snap))
	return snap, nil
}

// givenIndex is the index of snap from w.SnapshotLayout, when snap is w's snapshot and the
// Layout is its; nil otherwise.
func givenIndex(w Write, snap []byte) *index {
	if len(snap) == 0 || len(w.Snapshot) != len(snap) || &w.Snapshot[0] != &snap[0] {
		return nil
	}
	return indexOf(snap, w.SnapshotLayout)
}

// markDeleting flags key's kept version: its deletion snapshot was written. Writes of one object
// are sequential, so nothing else touches the version meanwhile.
func (s *Stream) markDeleting(key aggregator.ObjectKey) {
	if v, ok := s.cache.Peek(key); ok {
		v.deleting = true
	}
}

func (s *Stream) snapshot(gr diff.Resource, w Write) ([]byte, error) {
	if w.Snapshot != nil {
		return w.Snapshot, nil
	}
	return s.differ.Snapshot(gr, w.Response)
}

func (s *Stream) store(key aggregator.ObjectKey, rv string, snap []byte) {
	s.storeIndexed(key, rv, snap, nil)
}

func (s *Stream) storeIndexed(key aggregator.ObjectKey, rv string, snap []byte, idx *index) {
	if len(snap) > s.cfg.MaxBodyBytes {
		s.cache.Remove(key)
		return
	}
	s.cache.Add(key, &version{rv: rv, body: snap, idx: idx})
}

func (s *Stream) update(key aggregator.ObjectKey, gr diff.Resource, w Write) (Result, string) {
	rv := w.ResourceVersion
	prev, havePrev := s.cache.Get(key)
	if unchanged(w, prev, havePrev) {
		return s.note(w.Time, diff.OpNone, "no-op: resourceVersion "+rv+" unchanged"), resultNoop
	}
	if havePrev && compareRV(prev.rv, rv) > 0 {
		return s.unavailable(w, fmt.Sprintf("diff unavailable: the last version seen (resourceVersion %s) is newer than this one (%s)", prev.rv, rv)), resultUnavailable
	}
	snap, err := s.snapshot(gr, w)
	if err != nil {
		s.cache.Remove(key)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: %v", err)), resultError
	}
	if len(snap) > s.cfg.MaxBodyBytes {
		s.cache.Remove(key)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: object larger than %d bytes", s.cfg.MaxBodyBytes)), resultUnavailable
	}
	given := givenIndex(w, snap)
	if !havePrev {
		s.storeIndexed(key, rv, snap, given)
		return s.fromRequest(gr, w, "diff unavailable: no previous version seen")
	}
	return s.compareWith(key, gr, w, prev, snap, given)
}

// compareWith diffs snap (given: its index, or nil), the new version of key, against prev, and
// keeps it.
func (s *Stream) compareWith(key aggregator.ObjectKey, gr diff.Resource, w Write, prev *version, snap []byte, given *index) (Result, string) {
	rv := w.ResourceVersion
	changes, idx, err := s.differ.compare(gr, prev.body, prev.idx, snap, given, true)
	if err != nil {
		s.store(key, rv, snap)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: %v", err)), resultError
	}
	s.storeIndexed(key, rv, snap, idx)
	attrs := aggregator.Attrs{{Key: diff.AttrBaseRV, Value: prev.rv}}
	if len(changes) == 0 {
		r := s.note(w.Time, diff.OpNone, "no change besides bookkeeping fields (resourceVersion "+shownRV(prev.rv)+" -> "+shownRV(rv)+")")
		r.Attributes = attrs
		return r, resultNoop
	}
	return Result{Logs: s.changeLogs(w.Time, changes), Attributes: attrs}, resultDiff
}

// unchanged reports whether w left the object as it was: its resourceVersion is the one it was
// based on, or the last one seen; never for a Final write.
func unchanged(w Write, prev *version, havePrev bool) bool {
	rv := w.ResourceVersion
	return rv != "" && !w.Final && (w.RequestResourceVersion == rv || (havePrev && prev.rv == rv))
}

// metadata diffs a write answered with the object's metadata only: the last version seen, with
// the response's metadata in place of its own, is the new version. Without a version seen, a
// patch shows its request body (fromRequest).
func (s *Stream) metadata(key aggregator.ObjectKey, gr diff.Resource, w Write) (Result, string) {
	rv := w.ResourceVersion
	prev, havePrev := s.cache.Get(key)
	if unchanged(w, prev, havePrev) {
		return s.note(w.Time, diff.OpNone, "no-op: resourceVersion "+rv+" unchanged"), resultNoop
	}
	if !havePrev {
		return s.fromRequest(gr, w, "diff unavailable: no previous version seen (the response held the object's metadata only)")
	}
	if compareRV(prev.rv, rv) > 0 {
		return s.unavailable(w, fmt.Sprintf("diff unavailable: the last version seen (resourceVersion %s) is newer than this one (%s)", prev.rv, rv)), resultUnavailable
	}
	meta, ok := getPath(w.Response, "metadata")
	if !ok || kindOf(meta) != '{' {
		return Result{}, resultSkipped
	}
	// The response's metadata as snapshots have it (no managedFields, redacted).
	metaSnap, err := s.differ.Snapshot(gr, []byte(`{"metadata":`+string(meta)+`}`))
	if err == nil {
		meta, _ = getPath(metaSnap, "metadata")
	}
	var body []byte
	var sp splice
	if err == nil {
		body, _, _, sp, err = replacePath(prev.body, prev.idx, meta, "metadata")
	}
	if err != nil {
		s.cache.Remove(key)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: %v", err)), resultError
	}
	return s.compareWith(key, gr, w, prev, body, prev.idx.spliced(body, sp))
}

// fromRequest is what a write whose previous version is unknown gets: for a merge or
// strategic-merge patch, a note (OpRequestPatch) and the changes its request body asks for;
// otherwise an OpUnavailable note, why.
func (s *Stream) fromRequest(gr diff.Resource, w Write, why string) (Result, string) {
	if w.Verb == "patch" {
		if changes, kind, ok := s.differ.patchChanges(gr, w.Request); ok && len(changes) > 0 {
			note := NoteLog(w.Time, OpRequestPatch, why+"; the changes are the request's "+kind+" (values before it unknown)")
			return Result{Logs: append([]aggregator.Log{note}, s.changeLogs(w.Time, changes)...)}, resultRequestPatch
		}
	}
	return s.unavailable(w, why), resultUnavailable
}

// scale turns a write to the scale subresource into the spec.replicas change of the object,
// and updates the kept version to match.
func (s *Stream) scale(key aggregator.ObjectKey, w Write) (Result, string) {
	if w.IsObject || !isKind(w.Response, "Scale") {
		return Result{}, resultSkipped
	}
	newReplicas, ok := getPath(w.Response, "spec", "replicas")
	if !ok {
		return Result{}, resultSkipped
	}
	rv := ""
	if v, ok := getPath(w.Response, "metadata", "resourceVersion"); ok && kindOf(v) == '"' {
		rv = unquote(v)
	}
	prev, havePrev := s.cache.Get(key)
	if rv != "" && (w.RequestResourceVersion == rv || (havePrev && prev.rv == rv)) {
		return s.note(w.Time, diff.OpNone, "no-op: resourceVersion "+rv+" unchanged"), resultNoop
	}
	if !havePrev {
		return s.unavailable(w, "diff unavailable: no previous version seen"), resultUnavailable
	}
	if compareRV(prev.rv, rv) > 0 {
		return s.unavailable(w, fmt.Sprintf("diff unavailable: the last version seen (resourceVersion %s) is newer than this one (%s)", prev.rv, rv)), resultUnavailable
	}
	attrs := aggregator.Attrs{{Key: diff.AttrBaseRV, Value: prev.rv}}
	body, oldReplicas, had, sp, err := replacePath(prev.body, prev.idx, newReplicas, "spec", "replicas")
	idx := prev.idx.spliced(body, sp)
	if err == nil && rv != "" {
		var sp2 splice
		if body, _, _, sp2, err = replacePath(body, idx, strconv.AppendQuote(nil, rv), "metadata", "resourceVersion"); err == nil {
			idx = idx.spliced(body, sp2)
		}
	}
	if err != nil {
		s.cache.Remove(key)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: %v", err)), resultError
	}
	s.storeIndexed(key, rv, body, idx)
	if had && (string(oldReplicas) == string(newReplicas) || (kindOf(oldReplicas) == '0' && kindOf(newReplicas) == '0' && numEqual(oldReplicas, newReplicas))) {
		r := s.note(w.Time, diff.OpNone, "no change besides bookkeeping fields (resourceVersion "+shownRV(prev.rv)+" -> "+shownRV(rv)+")")
		r.Attributes = attrs
		return r, resultNoop
	}
	c := Change{Path: "spec.replicas", Op: OpReplace, Old: oldReplicas, New: newReplicas}
	if !had {
		c.Op, c.Old = OpAdd, nil
	}
	return Result{Logs: s.changeLogs(w.Time, []Change{c}), Attributes: attrs}, resultDiff
}

// binding turns the creation of a pod's binding subresource into the spec.nodeName change of the
// pod, and updates the kept version to match (the response is a Status, so no resourceVersion).
func (s *Stream) binding(key aggregator.ObjectKey, w Write) (Result, string) {
	node, ok := getPath(w.Request, "target", "name")
	if !ok || kindOf(node) != '"' || !isKind(w.Request, "Binding") {
		return Result{}, resultSkipped
	}
	prev, havePrev := s.cache.Get(key)
	if !havePrev {
		c := Change{Path: "spec.nodeName", Op: OpAdd, New: node}
		return Result{Logs: s.changeLogs(w.Time, []Change{c})}, resultDiff
	}
	body, old, had, sp, err := replacePath(prev.body, prev.idx, node, "spec", "nodeName")
	if err != nil {
		s.cache.Remove(key)
		return s.unavailable(w, fmt.Sprintf("diff unavailable: %v", err)), resultError
	}
	s.storeIndexed(key, prev.rv, body, prev.idx.spliced(body, sp))
	c := Change{Path: "spec.nodeName", Op: OpReplace, Old: old, New: node}
	if !had || isNull(old) {
		c.Op, c.Old = OpAdd, nil
	}
	return Result{Logs: s.changeLogs(w.Time, []Change{c}), Attributes: aggregator.Attrs{{Key: diff.AttrBaseRV, Value: prev.rv}}}, resultDiff
}

func isKind(body []byte, kind string) bool {
	v, ok := lookupMember(body, "kind", nil)
	return ok && kindOf(v) == '"' && unquote(v) == kind
}

func (s *Stream) changeLogs(at time.Time, changes []Change) []aggregator.Log {
	return s.format.ChangeLogs(at, changes)
}

func (s *Stream) note(at time.Time, op, msg string) Result {
	return Result{Logs: []aggregator.Log{NoteLog(at, op, msg)}}
}

func (s *Stream) unavailable(w Write, msg string) Result {
	return s.note(w.Time, diff.OpUnavailable, msg)
}

func (s *Stream) snapshotLog(at time.Time, kind, source, rv string, snap []byte) aggregator.Log {
	// The Stream's snapshots (kept versions, Write.Snapshot) are never modified: the log can
	// share their memory.
	return s.format.snapshotLog(at, kind, source, rv, snap, true)
}

// shownRV is a resourceVersion as notes show it: "unknown" when the body had none.
func shownRV(rv string) string {
	if rv == "" {
		return "unknown"
	}
	return rv
}

// compareRV orders two resourceVersions: etcd revisions compare as numbers. It returns 0 when
// they cannot be ordered (opaque values).
func compareRV(a, b string) int {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return 0
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Warm records w's version of its object like Observe, without computing what its span would
// carry: a queue member that takes a partition over replays the partition's recent writes to
// Warm (their spans were already emitted), so that its first diff of each object compares
// against the previous version. A version older than the one kept is ignored. Writes are
// counted as result warmed.
func (s *Stream) Warm(ctx context.Context, w Write) {
	if s == nil || s.cfg.Disabled {
		return
	}
	s.warm(w)
	s.results.Add(s.resultIdx[resultWarmed], 1)
}

func (s *Stream) warm(w Write) {
	key := w.Object.Key()
	gr := diff.Resource{Group: w.Object.Group, Resource: w.Object.Resource}
	newer := func() bool {
		prev, ok := s.cache.Peek(key)
		return ok && compareRV(prev.rv, w.ResourceVersion) > 0
	}
	switch w.Verb {
	case "create", "update", "patch":
		switch {
		case w.Subresource == "binding" && w.Verb == "create":
			s.binding(key, w)
		case w.Subresource == "scale":
			s.scale(key, w)
		case w.MetadataOnly && w.Subresource == "" && w.Verb != "create":
			s.metadata(key, gr, w)
		case w.IsObject && (w.Subresource == "" || w.Verb != "create") && !newer():
			_, _ = s.keep(key, gr, w, w.ResourceVersion)
		}
	case "delete", "deletecollection":
		switch {
		case w.Subresource != "" || newer():
		case w.IsObject:
			if _, err := s.keep(key, gr, w, w.ResourceVersion); err == nil {
				s.markDeleting(key)
			}
		default:
			s.cache.Remove(key)
		}
	}
}
