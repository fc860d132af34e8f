// Package aggregator turns events about Kubernetes objects into spans: one trace per object per
// time window, an object span at its root, one child span per event, and link spans between
// related objects (found by Linkers). Finished spans go to every Sink; Decorators may enrich them
// on the way. Sources call Aggregator.Send.
//
// IDs are deterministic (see TraceIDFor, ObjectSpanID, LinkSpanID, EventSpanID), so every process
// computes the same trace for the same object and window, and replayed input yields the same spans.
package aggregator
