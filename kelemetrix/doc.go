// Package kelemetrix turns the audit stream into metrics: request counts, latencies, latency as a
// fraction of the request's timeout, object sizes and delivery delays, labelled by who called the
// API server (user, user agent), what it asked (verb, resource, subresource, namespace, ...) and
// how it went (code, error reason).
//
// Metrics are defined in YAML (Config, ParseConfig): a kind (counter or histogram), a quantity,
// labels from tag providers, and tag and quantity filters. A Processor computes, for each audit
// event, only the tags and quantities its metrics use, and records them through the OpenTelemetry
// metric API (served on /metrics with the rest of Kelemetry's metrics), with the number of series
// of each metric capped (maxSeries, the overflow folded into one series whose labels are all
// "other", and counted; Module raises the SDK's own cardinality limit above it).
//
// The Processor is fed by the audit pipeline as an audit.Observer (Module, in the all-in-one),
// and sees every verb and stage, reads included; or it is the queue of an audit webhook and log
// replay of its own (it implements queue.Queue), for metrics without traces
// (examples/kelemetrix).
package kelemetrix
