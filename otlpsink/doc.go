// Package otlpsink is an aggregator.Sink that sends spans to an OpenTelemetry backend (an
// OpenTelemetry Collector, Jaeger, Tempo, ...) over OTLP, by gRPC or HTTP. Spans keep Kelemetry's
// own trace IDs, span IDs, parent IDs and timestamps, so traces written here and traces in the
// embedded store are the same traces.
//
// The endpoint's form decides protocol and TLS (see Config.Endpoint); Validate fails on one it
// cannot parse.
//
// Export only enqueues, all of its spans or none: a queue bounded by spans and by bytes feeds one
// worker that sends batches by size or by time and retries a failed batch with backoff until it
// is sent (the batch keeps its room in the queue meanwhile). When the queue is full, Export
// refuses with an error wrapping aggregator.ErrSinkBusy (the audit consumer retries the event)
// and Health reports the sink busy (the audit webhook answers 429, kube-apiserver retries), so
// nothing is lost while the receiver is slow or down. Spans are dropped only when Config says so
// (DropWhenFull, MaxRetries), when the receiver refuses them for good (the OTLP specification's
// non-retryable answers, or a partial success), or at Stop's deadline, and every one is counted
// in kelemetry.otlp.spans.dropped with its reason. A request the receiver refuses as too large is
// split in halves and sent again.
//
// New builds the sink from Config. With Config.Endpoint set, it encodes each
// ExportTraceServiceRequest in the protobuf wire format itself, straight from its spans, and
// sends it on its own gRPC connection or HTTP client (gzip, headers, TLS); without one (the
// OTEL_EXPORTER_OTLP_* environment variables) it sends through the OpenTelemetry SDK's exporter,
// as NewWithExporter does with any exporter. Sync sends what is queued at once and returns when
// the receiver has acknowledged it (aggregator.Syncer), so that queues acknowledge only spans
// the receiver holds. Module (Provide) adds a sink to the application when Config.Endpoint is
// set; the store's jaeger backend writes through one of its own.
package otlpsink
