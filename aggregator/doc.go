// Package aggregator turns events about Kubernetes objects into spans: one trace per object per
// time window (Window, aligned to the Unix epoch), an object span at its root, one child span per
// event, and link spans between related objects. Sources (the audit consumer, the Kubernetes
// Event source) call Aggregator.Send; finished spans go to every Sink; Decorators may change them
// on the way.
//
// IDs are deterministic (TraceIDFor, ObjectSpanID, LinkSpanID, EventSpanID): a trace ID is the
// object's 56-bit hash, a scheme byte and the window start, so every process computes the same
// trace for the same object and window, replayed input yields the same spans, and a reader can
// compute an object's trace IDs instead of searching for them.
//
// Engine (New, Module) is the Aggregator. It writes an object's span once per window (a bounded
// cache remembers which), and runs the Linkers of each object on link workers: an object's jobs
// run in order on one worker, so the links stored do not depend on timing; linking follows
// linked objects transitively up to Config.LinkDepth; an IsolatedLinker (a linker in another
// process) runs on workers of its own. Links a linker returns, and links an event carries (a
// Kubernetes Event's related object), become link spans on both objects' traces.
//
// The interfaces say who owns what and what may run concurrently; function adapters (NewLinker,
// NewDecorator, SinkFunc) and fx registration helpers (AsLinker, AsDecorator, AsSink) make the
// extension points easy to fill. A sink may implement Syncer (spans survive a crash once Sync
// returns), HealthChecker (it takes no writes now: ErrSinkUnavailable, or ErrSinkBusy while only
// back-pressured) and SpanChecker (it holds a span already); the engine's SyncSinks, SinkHealth,
// HasEvents and LinkJobs are what the audit queues, the webhook and /healthz use. Link spans a
// sink refuses as unavailable are retried with backoff; Send returns an event's export error to
// its source, which retries it.
//
// One shared rule lives here too: ValidateClusterName (one rule for every cluster name).
package aggregator
