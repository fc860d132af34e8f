// Package informer is the diff source for clusters that audit at Metadata level (no response
// bodies): an Informer lists and watches the configured resources of one cluster, keeps a
// stripped copy of each object (bounded by count and bytes) and records per-resourceVersion
// changes and creation/deletion snapshots in a changes.Store, which the audit consumer queries
// without waiting.
//
// Module (newModule) wires it into an fx application: one store (a changes.Cache, or an
// etcdstore.Store shared by replicas) written by one Informer per cluster, with optional leader
// election (package leader) so that only one replica records.
package informer
