// Package jaeger is the store backend of several replicas: a store.Store whose spans go over
// OTLP to a Jaeger collector (the otlpsink's bounded retry queue, which pushes back when full)
// and are read back through Jaeger's remote storage API (jaeger.storage.v2) with a byte-bounded
// read cache. An object's trace IDs are computed from its key and window, so reads need no index;
// objects are found by attribute searches, clusters from one marker span per cluster and window,
// and a span written more than once is read once. It is read-only without an OTLP endpoint, for
// query-only replicas, and cannot resolve FindTraces (display IDs of earlier releases).
//
// Its Store implements the optional sink interfaces of package aggregator: Syncer, HealthChecker
// and SpanChecker (a redelivered message whose spans Jaeger already holds is not written again).
// Package jaegertest is an in-process stand-in for Jaeger, for unit tests.
package jaeger
