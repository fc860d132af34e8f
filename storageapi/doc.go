// Package storageapi serves Kelemetry's merged trees through Jaeger's remote storage API v2
// (jaeger.storage.v2, gRPC), so that a stock Jaeger v2 (Jaeger Query and Jaeger UI) configured
// with a "grpc" storage backend pointing at Kelemetry shows them. The mapping is that of the
// frontend's Jaeger HTTP API: services are display modes, operations are clusters, trace IDs are
// display IDs, and a search takes the short keys users type (cluster, resource, namespace, name,
// any event attribute) as attributes. DependencyReader answers the graph of object kinds and how
// they link (deployments -> replicasets -> pods), with the number of linked object pairs as the
// call count.
//
// newServer works without fx; Module serves it on Config.Addr with the gRPC health and
// reflection services. The listener bounds its connections (Config.MaxConnections), closes idle
// and silent ones (IdleTimeout, HandshakeTimeout), counts failed TLS handshakes, and answers a
// request it cannot decode with InvalidArgument.
package storageapi
