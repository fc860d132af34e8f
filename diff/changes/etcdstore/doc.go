// Package etcdstore configures the informer diff's change store shared by replicas through etcd
// (informer.StoreConfig.Etcd): the leading replica writes its records under leases (so they
// expire), and every replica mirrors them into its own cache. The store itself is internal;
// informer.Module builds it.
package etcdstore
