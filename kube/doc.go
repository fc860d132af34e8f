// Package kube holds cluster clients, resource mapping, object cache, shared by linkers, diff,
// event and link rules:
//
//   - Config and ClusterConfig name the clusters and their kubeconfigs; NewClusters builds
//     RESTClusters (Clusters and DiscoveryClusters) from them;
//   - Mapper maps kinds to resources: DiscoveryMapper asks each cluster's discovery API and falls
//     back to StaticMapper, a table of the built-in kinds plus a plural guess (GuessResource);
//   - ObjectGetter returns an object's current body: ObjectCache is a bounded cache with negative
//     caching over the clusters' dynamic clients;
//   - IsObjectKind tells a body that is an object from a Status, Scale, Eviction and the like.
//
// Module provides Clusters, Mapper and ObjectGetter to an fx application; NewAccess builds the
// same without fx. Package kubetest holds fakes for tests.
package kube
