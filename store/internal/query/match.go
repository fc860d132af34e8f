package query

import (
	"bytes"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Matcher holds a query's object filter and time bounds in comparable form (Unix nanoseconds).
type Matcher struct {
	Q              ObjectQuery
	Length         int64
	From, To       int64
	HasFrom, HasTo bool
}

// NewMatcher is the Matcher of q over windows of the given length.
func NewMatcher(q ObjectQuery, length time.Duration) Matcher {
	m := Matcher{Q: q, Length: int64(length)}
	if !q.From.IsZero() {
		m.HasFrom, m.From = true, q.From.UnixNano()
	}
	if !q.To.IsZero() {
		m.HasTo, m.To = true, q.To.UnixNano()
	}
	return m
}

// Limit is the query's object limit, DefaultLimit when unset.
func (m *Matcher) Limit() int {
	if m.Q.Limit <= 0 {
		return DefaultLimit
	}
	return m.Q.Limit
}

// Object reports whether the query's key fields match k.
func (m *Matcher) Object(k aggregator.ObjectKey) bool {
	q := &m.Q
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

// Window reports whether the window starting at start (Unix nanoseconds) overlaps the bounds.
func (m *Matcher) Window(start int64) bool {
	if m.HasTo && start > m.To {
		return false
	}
	if m.HasFrom && start+m.Length <= m.From {
		return false
	}
	return true
}

// Event reports whether sp is an event span starting within the bounds of m that has every
// attribute the query wants.
func (m *Matcher) Event(sp *aggregator.Span) bool {
	if sp.Kind != aggregator.KindEvent {
		return false
	}
	t := sp.Start.UnixNano()
	if (m.HasFrom && t < m.From) || (m.HasTo && t > m.To) {
		return false
	}
	for _, a := range m.Q.Attributes {
		if v, ok := sp.Attributes.Get(a.Key); !ok || v != a.Value {
			return false
		}
	}
	return true
}

// ValidPrefix reports a trace ID prefix that TraceQuery does not accept.
func ValidPrefix(p []byte) error {
	if len(p) == 0 || len(p) > len(trace.TraceID{}) {
		return fmt.Errorf("trace ID prefix of %d bytes: want 1 to 16", len(p))
	}
	return nil
}

// TraceLess orders trace references by (Window, TraceID).
func TraceLess(a, b TraceRef) int {
	if c := a.Window.Compare(b.Window); c != 0 {
		return c
	}
	return bytes.Compare(a.TraceID[:], b.TraceID[:])
}

// SpanLess orders spans by (Start, SpanID).
func SpanLess(a, b *aggregator.Span) int {
	if c := a.Start.Compare(b.Start); c != 0 {
		return c
	}
	return bytes.Compare(a.SpanID[:], b.SpanID[:])
}

// Newer reports whether a is a newer version of the same span than b: it ends later, or holds
// more (logs, attributes), or names a later object version. The same span arrives several times
// when several replicas write it, when a repeated Kubernetes Event updates it, or when an object
// or link span is written again in a later segment of the embedded store's window.
func Newer(a, b *aggregator.Span) bool {
	if c := a.End.Compare(b.End); c != 0 {
		return c > 0
	}
	if len(a.Logs) != len(b.Logs) {
		return len(a.Logs) > len(b.Logs)
	}
	if len(a.Attributes) != len(b.Attributes) {
		return len(a.Attributes) > len(b.Attributes)
	}
	av, bv := a.Object.Version, b.Object.Version
	if len(av) != len(bv) {
		return len(av) > len(bv)
	}
	return av > bv
}

// WindowNanos is the window of a span in Unix nanoseconds. A span without a window (which the
// aggregator never emits) is placed in the default-length window holding its start.
func WindowNanos(sp *aggregator.Span) int64 {
	if !sp.Window.IsZero() {
		return sp.Window.UnixNano()
	}
	return aggregator.WindowStart(sp.Start, aggregator.DefaultWindow).UnixNano()
}

// UnixTime is the UTC time of Unix nanoseconds.
func UnixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// TraceObject returns the object of one trace's spans: its object span's, else that of the first
// span naming one. ok is false when no span names an object.
func TraceObject(spans []*aggregator.Span) (ref aggregator.ObjectRef, ok bool) {
	for _, sp := range spans {
		if sp.Kind == aggregator.KindObject {
			return sp.Object, true
		}
	}
	for _, sp := range spans {
		if sp.Object.Resource != "" && sp.Object.Name != "" {
			return sp.Object, true
		}
	}
	return aggregator.ObjectRef{}, false
}
