// Package kube holds Kelemetry's access to Kubernetes clusters: cluster clients, resource mapping
// and the object cache, shared by the linkers, link rules, the diff informers and the Event
// source:
//
//   - Config and ClusterConfig name the clusters and their kubeconfigs (with client rate limits,
//     50 requests per second and a burst of 100 by default); newClusters builds RESTClusters
//     (Clusters and DiscoveryClusters) from them. Cluster names follow
//     aggregator.ValidateClusterName.
//   - Mapper maps kinds to resources: DiscoveryMapper asks each cluster's discovery API and falls
//     back to StaticMapper, a table of the built-in kinds plus a plural guess (guessResource).
//     ResourceScope also tells a known scope from a guessed one, for callers that must not invent
//     or drop a namespace.
//   - ObjectGetter returns an object's current body: ObjectCache GETs it from its cluster and
//     keeps it in an LRU bounded by objects and bytes, remembers objects that do not exist for a
//     while, shares concurrent fetches of one object, and logs a GET that RBAC refuses at Warn
//     (rate-limited), naming the resource to grant.
//   - IsObjectKind tells a body that is an object from a Status, Scale, Eviction and the like.
//
// Module provides Clusters, Mapper and ObjectGetter to an fx application (without a configured
// cluster, Clusters and ObjectGetter are nil and Mapper is a StaticMapper); New builds the
// same without fx. Package kubetest holds fakes for tests.
package kube
