// Package diff compares two versions of a Kubernetes object (JSON) and reports what changed, as
// readable lines ("spec.template.spec.containers[name=app].image alpine:3.16 -> alpine:3.17") and
// as machine-readable Changes.
//
// The comparison works on raw JSON: equal subtrees are recognised by their bytes and never
// decoded, so the cost is about one scan of each input plus the work on what differs. Lists are
// matched by merge key (name, containerPort, type, uid, ... as strategic merge patch does) before
// falling back to a longest-common-subsequence alignment, numbers compare by value, and
// bookkeeping fields (metadata.managedFields, resourceVersion, generation) are ignored by default.
// Secrets' data and stringData, and any field matched by a redaction rule, are replaced by a keyed
// hash marker in every output (changes, snapshots, stored versions).
//
// Stream keeps the previous version of each object seen in the audit stream (bounded LRU) and turns
// each write into diff or snapshot logs for the aggregator.
//
// Informer is the source for clusters that audit at Metadata level (no response bodies): it
// lists and watches the configured resources, keeps a stripped copy of each object (bounded by
// count and bytes) and records per-resourceVersion changes and creation/deletion snapshots in a
// Changes store, which the audit consumer queries without waiting: a ChangeCache (bounded, with a
// TTL, in this process) or, with several replicas, an EtcdCache (the leader writes the records
// into etcd under leases, every replica mirrors them into its own ChangeCache).
package diff
