package query

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// ErrNotFound is returned by GetTrace for a trace without stored spans.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by a store used after Stop.
var ErrClosed = errors.New("store closed")

// ErrUnavailable is wrapped by the errors of a store that cannot serve for now: writes the
// embedded store refuses while its disk is full or failing (reads keep working meanwhile, and
// the store recovers by itself; Health reports the same condition), reads of a Jaeger backend
// that is down. Callers retry later. It wraps aggregator.ErrSinkUnavailable, so that the audit
// consumer retries.
var ErrUnavailable = fmt.Errorf("store unavailable: %w", aggregator.ErrSinkUnavailable)

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
	// Limit is the maximum number of objects (not windows) returned; 0 or less means 100.
	Limit int
	// Attributes, when set, keep only windows holding an event span that has every one of these
	// attributes (exact values) and starts within [From, To], bounds included. Objects without
	// such a window are left out, and the limit counts the objects that remain.
	Attributes aggregator.Attrs
}

// Key is the object key q names (its Exact meaning).
func (q *ObjectQuery) Key() aggregator.ObjectKey {
	return aggregator.ObjectKey{Cluster: q.Cluster, Group: q.Group, Resource: q.Resource, Namespace: q.Namespace, Name: q.Name}
}

// Exact is the query of one object's windows over [from, to].
func Exact(k aggregator.ObjectKey, from, to time.Time) ObjectQuery {
	return ObjectQuery{Cluster: k.Cluster, Group: k.Group, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name,
		From: from, To: to, Limit: 1, Exact: true}
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
	// Segments is a hint of the embedded store, for its own reads: the parts of the window that
	// hold the trace's spans (bit i: the i-th sixth), as its object index recorded them; 0 when
	// not known (every part is read). Other stores leave it 0 and ignore it.
	Segments uint8
}

// ObjectWindows is one object and its matching windows.
type ObjectWindows struct {
	// Object is taken from the newest matching window: from its latest object span if one was
	// stored, otherwise from the first span stored in that window. Version and UID may be set.
	Object aggregator.ObjectRef
	// Windows are sorted by Window, ascending.
	Windows []ObjectWindow
}

// DefaultMaxFutureSkew is how far past the current time a window may start: the embedded store
// keeps such windows by default (its maxFutureSkew), and the jaeger backend searches that far
// ahead.
const DefaultMaxFutureSkew = 24 * time.Hour
