// Package linker holds the built-in linkers, which tell the aggregator how objects relate:
//
//   - OwnerLinker links an object to its controlling owner (the ownerReference with
//     controller: true), class "children";
//   - AnnotationLinker links an object to the parent named in its kelemetry.io/parent-link
//     annotation (or the predecessor's kelemetry.kubewharf.io/parent-link), which can be in
//     another cluster.
//
// Both read the object body that came with the event and, when there is none, fetch it through a
// kube.ObjectGetter (the shared kube.ObjectCache). The owner linker maps owner kinds to
// resources with a kube.Mapper. Package kube builds both from the cluster configuration.
//
// Config turns either off. Module wires the linkers into fx (the kelemetry.linkers value group);
// New builds them without fx.
package linker
