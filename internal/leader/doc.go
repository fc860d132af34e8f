// Package leader elects one replica of the informer diff source to record changes: every replica
// watches (so that a new leader has the last versions at hand), but only the holder of a
// coordination.k8s.io/v1 Lease writes records. New builds an Elector over a dynamic client from
// a leader.Config of package diff/leader; Elector.Leading is what informer.Informer.SetLeading
// takes.
package leader
