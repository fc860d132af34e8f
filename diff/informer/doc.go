// Package informer is the diff source for clusters that audit at Metadata level (no response
// bodies): for each watched cluster an informer lists and watches the configured resources,
// keeps a stripped copy of each object (bounded by count and bytes) and records
// per-resourceVersion changes and creation/deletion snapshots in a change store, which the audit
// consumer queries without waiting.
//
// Module (newModule) wires it into an fx application from a ModuleConfig: one store (in memory,
// or in etcd shared by replicas: StoreConfig) written by one informer per cluster, with optional
// leader election (leader.Config) so that only one replica records. The informer, the stores and
// the elector themselves are internal (internal/informer, internal/changes, internal/etcdstore,
// internal/leader).
package informer
