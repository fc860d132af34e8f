package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// ErrNotFound is returned by GetTrace for a trace without stored spans.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store closed")

// DefaultLimit is the number of objects FindObjects returns when ObjectQuery.Limit is 0.
const DefaultLimit = 100

// ObjectQuery selects objects and their windows.
type ObjectQuery struct {
	// Cluster, Group, Resource, Namespace and Name must equal the object's; empty matches any
	// unless Exact is set.
	Cluster, Group, Resource, Namespace, Name string
	// Exact makes empty fields match only empty values: the query names one object's key.
	Exact bool
	// From and To bound the time range; a zero value is unbounded. A window [start, start+length)
	// matches if it overlaps [From, To], bounds included: start <= To and From < start+length.
	From, To time.Time
	// Limit is the maximum number of objects (not windows) returned; 0 or less means DefaultLimit.
	Limit int
	// Attributes, when set, keep only windows holding an event span that has every one of these
	// attributes (exact values) and starts within [From, To], bounds included. Objects without
	// such a window are left out, and the limit counts the objects that remain.
	Attributes aggregator.Attrs
}

// TraceQuery selects stored traces by the leading bytes of their trace ID.
type TraceQuery struct {
	// IDPrefix is the first bytes of the trace ID (1 to 16 of them).
	IDPrefix []byte
	// From and To bound the windows as in ObjectQuery; a zero value is unbounded.
	From, To time.Time
}

// TraceRef is one stored trace: one object in one window.
type TraceRef struct {
	TraceID trace.TraceID
	Window  time.Time
	// Object is the reference the object index holds for the trace (see ObjectWindows.Object).
	Object aggregator.ObjectRef
}

// ObjectWindow is one window of an object and the trace that holds it.
type ObjectWindow struct {
	Window  time.Time
	TraceID trace.TraceID
}

// ObjectWindows is one object and its matching windows.
type ObjectWindows struct {
	// Object is taken from the newest matching window: from its latest object span if one was
	// stored, otherwise from the first span stored in that window. Version and UID may be set.
	Object aggregator.ObjectRef
	// Windows are sorted by Window, ascending.
	Windows []ObjectWindow
}

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
	FindTraces(ctx context.Context, q TraceQuery) ([]TraceRef, error)
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
	_ Store                    = (*Memory)(nil)
	_ Store                    = (*Pebble)(nil)
	_ aggregator.HealthChecker = (*Pebble)(nil)
	_ ExactFinder              = (*Jaeger)(nil)
	_ ExactFinder              = (*Pebble)(nil)
	_ aggregator.SpanChecker   = (*Jaeger)(nil)
)

// windowNanos is the window of a span in Unix nanoseconds. A span without a window (which the
// aggregator never emits) is placed in the default-length window holding its start.
func windowNanos(sp *aggregator.Span) int64 {
	if !sp.Window.IsZero() {
		return sp.Window.UnixNano()
	}
	return aggregator.WindowStart(sp.Start, aggregator.DefaultWindow).UnixNano()
}

// matcher holds a query's object filter and time bounds in comparable form.
type matcher struct {
	q              ObjectQuery
	length         int64
	from, to       int64
	hasFrom, hasTo bool
}

func newMatcher(q ObjectQuery, length time.Duration) matcher {
	m := matcher{q: q, length: int64(length)}
	if !q.From.IsZero() {
		m.hasFrom, m.from = true, q.From.UnixNano()
	}
	if !q.To.IsZero() {
		m.hasTo, m.to = true, q.To.UnixNano()
	}
	return m
}

func (q *ObjectQuery) key() aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: q.Cluster, Group: q.Group, Resource: q.Resource, Namespace: q.Namespace, Name: q.Name}
}

func (m *matcher) limit() int {
	if m.q.Limit <= 0 {
		return DefaultLimit
	}
	return m.q.Limit
}

func (m *matcher) object(k aggregator.ObjectKey) bool {
	q := &m.q
	if q.Exact {
		return q.Cluster == k.Cluster && q.Group == k.Group && q.Resource == k.Resource &&
			q.Namespace == k.Namespace && q.Name == k.Name
	}
	return (q.Cluster == "" || q.Cluster == k.Cluster) &&
		(q.Group == "" || q.Group == k.Group) &&
		(q.Resource == "" || q.Resource == k.Resource) &&
		(q.Namespace == "" || q.Namespace == k.Namespace) &&
		(q.Name == "" || q.Name == k.Name)
}

func (m *matcher) window(start int64) bool {
	if m.hasTo && start > m.to {
		return false
	}
	if m.hasFrom && start+m.length <= m.from {
		return false
	}
	return true
}

// event reports whether sp is an event span starting within the bounds of m that has every
// attribute of want.
func (m *matcher) event(sp *aggregator.Span) bool {
	if sp.Kind != aggregator.KindEvent {
		return false
	}
	t := sp.Start.UnixNano()
	if (m.hasFrom && t < m.from) || (m.hasTo && t > m.to) {
		return false
	}
	for _, a := range m.q.Attributes {
		if v, ok := sp.Attributes.Get(a.Key); !ok || v != a.Value {
			return false
		}
	}
	return true
}

func validPrefix(p []byte) error {
	if len(p) == 0 || len(p) > len(trace.TraceID{}) {
		return fmt.Errorf("trace ID prefix of %d bytes: want 1 to 16", len(p))
	}
	return nil
}

func traceLess(a, b TraceRef) int {
	if c := a.Window.Compare(b.Window); c != 0 {
		return c
	}
	return bytes.Compare(a.TraceID[:], b.TraceID[:])
}

// spanLess orders spans by (Start, SpanID).
func spanLess(a, b *aggregator.Span) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return bytes.Compare(a.SpanID[:], b.SpanID[:])
}
