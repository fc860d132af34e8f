// Package e2e holds Kelemetry's end-to-end scenario tests: they run a real control plane
// (embedded etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), send its audit
// stream to the all-in-one built from this checkout, drive the cluster with client-go and check
// the resulting traces through the HTTP API. The Jaeger scenarios run a real Jaeger v2 (package
// jaegerproc) as the database Kelemetry writes into and as Jaeger Query over Kelemetry's
// jaeger.storage.v2 server. Run them with ../scripts/e2e.sh.
package e2e
