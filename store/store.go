package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
)

// ErrNotFound is returned by GetTrace for a trace without stored spans.
var ErrNotFound = query.ErrNotFound

// ErrUnavailable is wrapped by the errors of a store that cannot serve for now: writes the
// embedded store refuses while its disk is full or failing (reads keep working meanwhile, and
// the store recovers by itself), reads of a Jaeger backend that is down. Callers retry later.
// It wraps aggregator.ErrSinkUnavailable, so that the audit consumer retries.
var ErrUnavailable = query.ErrUnavailable

// ObjectQuery selects objects and their windows: by the fields of their key (empty matches any,
// unless Exact), by a time range that their windows overlap, and by event attributes. Limit
// counts objects, not windows (0: 100).
type ObjectQuery = query.ObjectQuery

// TraceQuery selects stored traces by the leading bytes of their trace ID (IDPrefix, 1 to 16
// bytes) and a time range that their windows overlap.
type TraceQuery = query.TraceQuery

// traceRef is one stored trace: one object in one window.
type traceRef = query.TraceRef

// ObjectWindow is one window of an object and the trace that holds it.
type ObjectWindow = query.ObjectWindow

// ObjectWindows is one object and its matching windows, sorted by Window.
type ObjectWindows = query.ObjectWindows

// Reader reads stored traces.
type Reader interface {
	// FindObjects returns the objects matching q, sorted by the string of their key
	// (aggregator.ObjectKey.String), at most q.Limit of them.
	FindObjects(ctx context.Context, q ObjectQuery) ([]ObjectWindows, error)
	// GetTrace returns the spans of one trace sorted by (Start, SpanID), or ErrNotFound. The
	// returned spans are the caller's; the slices and pointers inside them may be shared with the
	// store and must not be modified.
	GetTrace(ctx context.Context, id trace.TraceID) ([]*aggregator.Span, error)
	// GetTraces reads several traces at once, each in its known window (as FindObjects returns
	// them): out[i] holds the spans of ws[i] sorted by (Start, SpanID), nil when none are
	// stored. The same sharing rules as GetTrace apply.
	GetTraces(ctx context.Context, ws []ObjectWindow) ([][]*aggregator.Span, error)
	// FindTraces returns the traces whose ID starts with q.IDPrefix and whose window overlaps
	// [q.From, q.To], sorted by (Window, TraceID). It resolves short trace references, such as
	// the frontend's display IDs, without any other state.
	FindTraces(ctx context.Context, q TraceQuery) ([]traceRef, error)
	// Clusters returns the names of the clusters that have stored objects, sorted.
	Clusters(ctx context.Context) ([]string, error)
}

// ExactFinder is implemented by readers that find many objects' windows in one call faster than
// one FindObjects each (a remote store, where each call is a round trip). The query engine uses
// it to load the objects a link walk reaches.
type ExactFinder interface {
	// FindExact returns, for each key, what FindObjects returns for the exact key over [from,
	// to]: out[i] is keys[i]'s object and windows, with no windows when nothing is stored.
	FindExact(ctx context.Context, keys []aggregator.ObjectKey, from, to time.Time) ([]ObjectWindows, error)
}

// Store is a sink that can be read back, with one lifecycle for every backend. Start begins
// the background work of the store (the retention of the embedded store, the writer of the
// jaeger backend) and returns at once. Stop ends it: it waits for that work, commits or flushes
// what Export accepted, and closes the store, giving up waiting when ctx ends. Stop is safe
// without Start and more than once; a stopped store is not started again.
type Store interface {
	aggregator.Sink
	Reader
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

var (
	_ Store                    = (*memory.Store)(nil)
	_ Store                    = (*pebble.Store)(nil)
	_ Store                    = (*jaeger.Store)(nil)
	_ aggregator.HealthChecker = (*pebble.Store)(nil)
	_ aggregator.HealthChecker = (*jaeger.Store)(nil)
	_ aggregator.Syncer        = (*pebble.Store)(nil)
	_ aggregator.Syncer        = (*jaeger.Store)(nil)
	_ ExactFinder              = (*jaeger.Store)(nil)
	_ ExactFinder              = (*pebble.Store)(nil)
	_ aggregator.SpanChecker   = (*jaeger.Store)(nil)
)

// TraceObject returns the object of one trace's spans: its object span's, else that of the first
// span naming one. ok is false when no span names an object.
func TraceObject(spans []*aggregator.Span) (ref aggregator.ObjectRef, ok bool) {
	return query.TraceObject(spans)
}
