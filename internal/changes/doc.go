// Package changes stores what the informer diff source recorded (Records: the changes of one
// resourceVersion of an object, or its creation or deletion snapshot) for the audit consumer,
// which joins them onto audit events without a response body (Query, Store.Find).
//
// Cache keeps the records in this process (bounded, with a TTL; changes.CacheConfig of package
// diff/changes configures it). Package internal/etcdstore shares them between replicas: the
// leader writes them into etcd under leases, every replica mirrors them into its own Cache, so
// Find never waits on the network. It lives apart so that importing changes (as the audit
// consumer does) does not import the etcd client.
package changes
