// Package etcdstore is the changes.Store shared by replicas of the informer diff source through
// etcd: the leading replica writes its records under leases (so they expire), and every replica
// mirrors the prefix into its own changes.Cache, which Find reads without waiting on etcd. Its
// configuration is etcdstore.Config of package diff/changes/etcdstore.
//
// It is a package of its own so that the users of package changes (the audit consumer) do not
// import the etcd client.
package etcdstore
