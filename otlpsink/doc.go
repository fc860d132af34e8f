// Package otlpsink is an aggregator.Sink that sends spans to an OpenTelemetry backend (an
// OpenTelemetry Collector, Jaeger, Tempo, ...) over OTLP, by gRPC or HTTP. Spans keep Kelemetry's
// own trace IDs, span IDs, parent IDs and timestamps, so traces written here and traces in the
// embedded store are the same traces.
//
// Export only enqueues: a bounded queue feeds one worker that sends batches by size or by time,
// retries a failed batch with backoff and then drops it. Nothing is dropped silently: every lost
// span is counted in kelemetry.otlp.spans.dropped with its reason.
package otlpsink
