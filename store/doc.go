// Package store keeps finished spans and reads them back for the query side. A Store is an
// aggregator.Sink (a span written again replaces the earlier copy, or is read as one, so
// replayed input changes nothing) and a Reader, which answers what the frontend asks: which objects have traces in a time range
// (FindObjects, and FindExact for many exact keys at once), what is in one trace or in many
// known windows (GetTrace, GetTraces), which traces a display ID's prefix names (FindTraces), and
// which clusters have data (Clusters). Data is organised in the aggregator's time windows: one
// trace per object per window, its ID computed from the object and the window.
//
// Three backends, chosen by Config.Backend (New, Open; Module provides the Store, its Reader and
// its sink to fx, so fx.Replace of the Store replaces all three):
//
//   - Pebble (OpenPebble), the embedded persistent store of the all-in-one. Spans are encoded
//     compactly (schema version 2; a store of version 1 is read as it is and marked 2 once
//     writable, and an earlier Kelemetry then refuses it). Export is all or nothing and commits
//     the spans of consecutive Exports together; Sync makes them durable (the audit queues call it
//     before they acknowledge). Retention deletes whole windows by age (MaxAge, and windows
//     dated too far in the future) and by size (MaxBytes, the folder as du counts it), never
//     the current window for size. A full or failing disk is an operating state: writes are
//     refused with ErrUnavailable, reads keep working, Health says why, and the store recovers
//     by itself when a probe write succeeds.
//   - Memory (NewMemory), bounded by a number of spans, for tests and runs without a data
//     directory; the oldest windows are evicted first.
//   - Jaeger (OpenJaeger), shared by several replicas: spans go over OTLP to a Jaeger collector
//     (the otlpsink's bounded retry queue, which pushes back when full) and are read back through
//     Jaeger's remote storage API (jaeger.storage.v2) with a byte-bounded read cache. An
//     object's trace IDs are computed from its key and window, so reads need no index; objects
//     are found by attribute searches, clusters from one marker span per cluster and window, and
//     a span written more than once is read once. It is read-only without an OTLP endpoint, for
//     query-only replicas, and cannot resolve FindTraces (display IDs of earlier releases).
//
// Pebble and Jaeger implement the optional sink interfaces of package aggregator: Syncer (the
// queues acknowledge only synced spans) and HealthChecker (the webhook answers 503, or 429 while
// only busy, and /healthz reports why); Jaeger also SpanChecker (a redelivered message whose
// spans Jaeger already holds is not written again).
package store
