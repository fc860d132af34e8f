// Package audit turns Kubernetes audit events (audit.k8s.io/v1) into aggregator events. It has a
// webhook handler for kube-apiserver's audit webhook backend, a reader for the JSON-lines audit log
// (one-shot replay and a rotation-safe follow mode), a bounded queue partitioned by object so one
// object's events keep their order, and the consumer that builds spans from audit events.
package audit
