// Package store is the one store contract: a Store keeps finished spans and reads them back for
// the query side. A Store is an aggregator.Sink (a span written again replaces the earlier copy,
// or is read as one, so replayed input changes nothing) and a Reader, which answers what the
// frontend asks: which objects have traces in a time range (FindObjects, and FindExact of
// ExactFinder for many exact keys at once), what is in one trace or in many known windows
// (GetTrace, GetTraces), which traces a display ID's prefix names (FindTraces), and which
// clusters have data (Clusters). Data is organised in the aggregator's time windows: one trace
// per object per window, its ID computed from the object and the window. Every backend has the
// same lifecycle: Start, then Stop, which also closes it.
//
// The backends are packages below this one, chosen by Config.Backend (Open without fx; Module
// provides the Store, its Reader and its sink to fx, so fx.Replace of the Store replaces all
// three):
//
//   - store/pebble, the embedded persistent store of the all-in-one (Config.Embedded), with
//     retention by age and size, and a full or failing disk as an operating state
//     (ErrUnavailable);
//   - store/memory, bounded by a number of spans, for tests and runs without a data directory
//     (Config.Memory);
//   - store/jaeger, shared by several replicas: OTLP to a Jaeger collector, read back through
//     Jaeger's remote storage API (Config.Jaeger).
//
// The pebble and jaeger backends implement the optional sink interfaces of package aggregator:
// Syncer (the queues acknowledge only synced spans) and HealthChecker (the webhook answers 503,
// or 429 while only busy, and /healthz reports why); jaeger also SpanChecker.
package store
