// Package changes configures the store of what the informer diff source records (the changes of
// one resourceVersion of an object, or its creation or deletion snapshot) for the audit consumer,
// which joins them onto audit events without a response body: CacheConfig bounds the records
// kept in this process, and package etcdstore configures sharing them between replicas through
// etcd. The store itself is internal; informer.Module builds it.
package changes
