// Package informer is the informer diff source behind diff/informer's Module: an Informer lists
// and watches the configured resources of one cluster, keeps a stripped copy of each object
// (bounded by count and bytes) and records per-resourceVersion changes and creation/deletion
// snapshots in a changes.Store, which the audit consumer queries without waiting. Its Config
// mirrors informer.Config of diff/informer, which users write.
package informer
