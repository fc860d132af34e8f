// Package apitrace joins kube-apiserver's own request traces to the audit events they serve.
//
// kube-apiserver traces its requests (KEP-647: --tracing-config-file, OTLP over gRPC): a span for
// the HTTP request, the handler (Create, Update, Patch, Delete, ...), admission webhooks, etcd
// calls, serialisation. Its handler and HTTP spans carry the request's audit ID ("audit-id",
// truncated to 64 characters). The Receiver takes these spans (and any OTLP spans that carry an
// audit ID) on the OTLP listener (OTLP/gRPC and OTLP/HTTP, protobuf or JSON); the Joiner matches
// each request's spans to the audit event span the consumer wrote for the same audit ID,
// whichever arrives first, within Config.Wait, and writes them under that event span as
// aggregator.KindRequest spans, with IDs derived from the event span and kube-apiserver's span
// IDs: a replay, or another replica, writes the same spans.
//
// The join happens in the process that consumes the audit events (it sees their spans as a
// Decorator): point kube-apiserver's tracing at a replica that consumes (the all-in-one, or the
// consume role).
package apitrace
