// Package leader configures the leader election of the informer diff source
// (informer.ModuleConfig.LeaderElection): every replica watches (so that a new leader has the
// last versions at hand), but only the holder of a coordination.k8s.io/v1 Lease writes records.
// The elector itself is internal; informer.Module builds it.
package leader
