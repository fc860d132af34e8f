// Package diff holds the settings of Kelemetry's object diffs: Options (ignored fields, list
// merge keys, redaction rules) and StreamConfig (the audit-stream diff's bounds: objects and bytes
// kept, changes per write, value and snapshot sizes), and the span attribute keys the diffs are
// written with (AttrPath, AttrOp, AttrOld, AttrNew, AttrSnapshotKind, ...). The comparison
// itself works on raw JSON (merge keys as strategic merge patch, numbers by value, Secrets and
// matched fields replaced by a keyed hash): see docs/ingest/events-and-diffs.md.
//
// The parts built on it live in packages of their own: informer (the diff source for clusters
// that audit at Metadata level, with its fx Module), changes (the settings of the stores of what
// the informer recorded, in memory or shared through etcd) and leader (the leader election among
// replicas of the informer).
package diff
