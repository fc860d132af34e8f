// Package objdiff compares two versions of a Kubernetes object (JSON) and reports what changed, as
// readable lines ("spec.template.spec.containers[name=app].image alpine:3.16 -> alpine:3.17") and
// as machine-readable Changes.
//
// The comparison works on raw JSON: equal subtrees are recognised by their bytes and never
// decoded, so the cost is about one scan of each input plus the work on what differs. Lists are
// matched by merge key (name, containerPort, type, uid, ... as strategic merge patch does) before
// falling back to a longest-common-subsequence alignment, numbers compare by value, and
// bookkeeping fields (metadata.managedFields, resourceVersion, generation) are ignored by default.
// Secrets' data, stringData and kubectl.kubernetes.io/last-applied-configuration annotation (which
// holds the data of an applied Secret), and any field matched by a redaction rule, are replaced by a keyed
// hash marker in every output (changes, snapshots, stored versions).
//
// Differ compares and snapshots with fixed Options (ignored fields, merge keys, redaction rules).
// A Layout records where a document's larger objects and arrays open and close, so that a
// comparison finds them without scanning again; the audit decoder records it while it checks a
// response body and hands it over with the Write.
//
// Stream keeps the previous version of each object seen in the audit stream (an LRU bounded by
// objects and bytes) and turns each write into diff or snapshot logs for the aggregator: field
// diffs for updates and patches, the replica change of a scale write, the node of a binding,
// creation and deletion snapshots, and a "diff unavailable" note when no previous version is
// known. It never waits. Stream.Warm records versions without emitting anything, so that a
// replica taking over a NATS queue partition diffs each object's next write against its
// previous version.
//
// The settings (Options, StreamConfig) are package diff's, the public one; the informer diff
// source, the change stores and the leader election are diff/informer's and internal/'s.
package objdiff
