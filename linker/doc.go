// Package linker holds the built-in linkers, which tell the aggregator how objects relate:
//
//   - OwnerLinker links an object to its controlling owner (the ownerReference with
//     controller: true), class "children";
//   - AnnotationLinker links an object to the parent named in its kelemetry.io/parent-link
//     annotation (or the predecessor's kelemetry.kubewharf.io/parent-link), which can be in
//     another cluster.
//
// Both read the object body that came with the event and, when there is none, fetch it through an
// ObjectGetter: ObjectCache, a bounded cache with negative caching over per-cluster dynamic
// clients (Clusters; KubeClusters builds them from rest.Configs). The owner linker maps owner
// kinds to resources with a Mapper: DiscoveryMapper asks each cluster's discovery API and falls
// back to StaticMapper, a table of the built-in kinds plus a plural guess.
//
// Module wires all of it into fx; every piece also works without fx.
package linker
