// Package aggregatortest has fakes for testing code that uses the aggregator: a Sink that records
// spans, an Aggregator that records events, a Linker with fixed answers, a Decorator that records
// (and may change) the spans it sees, a compact text rendering of object trees for golden tests
// (RenderTrees), and the cluster names every entry point must accept or reject alike
// (ClusterNames).
package aggregatortest

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// RecordingSink keeps every exported span, deduplicated by (trace ID, span ID): a later export of
// the same span replaces the earlier one, as a real store would.
type RecordingSink struct {
	mu      sync.Mutex
	order   []spanKey
	spans   map[spanKey]*aggregator.Span
	exports int
	Err     error // returned by Export when set
}

type spanKey struct {
	tid trace.TraceID
	sid trace.SpanID
}

// Export records spans.
func (s *RecordingSink) Export(_ context.Context, spans []*aggregator.Span) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Err != nil {
		return s.Err
	}
	if s.spans == nil {
		s.spans = map[spanKey]*aggregator.Span{}
	}
	s.exports += len(spans)
	for _, sp := range spans {
		k := spanKey{sp.TraceID, sp.SpanID}
		if _, ok := s.spans[k]; !ok {
			s.order = append(s.order, k)
		}
		s.spans[k] = sp
	}
	return nil
}

// Spans returns the distinct spans recorded, in first-export order.
func (s *RecordingSink) Spans() []*aggregator.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*aggregator.Span, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, s.spans[k])
	}
	return out
}

// Exported is the number of spans exported, duplicates included.
func (s *RecordingSink) Exported() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exports
}

// RecordingAggregator records the events sent to it.
type RecordingAggregator struct {
	mu     sync.Mutex
	events []*aggregator.Event
	Err    error // returned by Send when set
}

// Send records ev.
func (a *RecordingAggregator) Send(_ context.Context, ev *aggregator.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Err != nil {
		return a.Err
	}
	a.events = append(a.events, ev)
	return nil
}

// Events returns the events sent so far.
func (a *RecordingAggregator) Events() []*aggregator.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*aggregator.Event(nil), a.events...)
}

// StaticLinker answers Lookup from a fixed table keyed by object key.
type StaticLinker struct {
	LinkerName string
	Links      map[aggregator.ObjectKey][]aggregator.Link
	Err        error

	mu    sync.Mutex
	calls []aggregator.ObjectKey
}

// Name returns LinkerName, or "static".
func (l *StaticLinker) Name() string {
	if l.LinkerName == "" {
		return "static"
	}
	return l.LinkerName
}

// Lookup returns the links registered for obj.
func (l *StaticLinker) Lookup(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	l.mu.Lock()
	l.calls = append(l.calls, obj.Key())
	l.mu.Unlock()
	if l.Err != nil {
		return nil, l.Err
	}
	return l.Links[obj.Key()], nil
}

// Calls returns the objects looked up so far.
func (l *StaticLinker) Calls() []aggregator.ObjectKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]aggregator.ObjectKey(nil), l.calls...)
}

// RecordingDecorator is a Decorator that records a copy of every span it saw (after Fn, when
// set, changed it). Safe for concurrent use, as the aggregator requires.
type RecordingDecorator struct {
	// DecoratorName is returned by Name; "recording" when empty.
	DecoratorName string
	// Fn, when set, is applied to each span before it is recorded.
	Fn func(ctx context.Context, span *aggregator.Span)

	mu    sync.Mutex
	spans []aggregator.Span
}

// Name returns DecoratorName, or "recording".
func (d *RecordingDecorator) Name() string {
	if d.DecoratorName == "" {
		return "recording"
	}
	return d.DecoratorName
}

// Decorate applies Fn and records a copy of span.
func (d *RecordingDecorator) Decorate(ctx context.Context, span *aggregator.Span) {
	if d.Fn != nil {
		d.Fn(ctx, span)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.spans = append(d.spans, *span)
}

// Spans returns copies of the spans decorated so far, in the order they were seen.
func (d *RecordingDecorator) Spans() []aggregator.Span {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]aggregator.Span(nil), d.spans...)
}
