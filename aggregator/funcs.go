package aggregator

import "context"

// linkerFunc is the Lookup of a Linker as a function; NewLinker gives it a name. It follows the
// contract of Linker.Lookup (called concurrently by the link workers; obj.Body is read-only).
type linkerFunc func(ctx context.Context, obj Object) ([]Link, error)

// NewLinker returns a Linker named name whose Lookup calls f. A nil f finds no links.
func NewLinker(name string, f linkerFunc) Linker { return funcLinker{name: name, f: f} }

type funcLinker struct {
	name string
	f    linkerFunc
}

func (l funcLinker) Name() string { return l.name }

func (l funcLinker) Lookup(ctx context.Context, obj Object) ([]Link, error) {
	if l.f == nil {
		return nil, nil
	}
	return l.f(ctx, obj)
}

// decoratorFunc is the Decorate of a Decorator as a function; NewDecorator gives it a name. It
// follows the contract of Decorator.Decorate (send path: fast, non-blocking, concurrent).
type decoratorFunc func(ctx context.Context, span *Span)

// NewDecorator returns a Decorator named name whose Decorate calls f. The name orders the
// decorators. A nil f changes nothing.
func NewDecorator(name string, f decoratorFunc) Decorator { return funcDecorator{name: name, f: f} }

type funcDecorator struct {
	name string
	f    decoratorFunc
}

func (d funcDecorator) Name() string { return d.name }

func (d funcDecorator) Decorate(ctx context.Context, span *Span) {
	if d.f != nil {
		d.f(ctx, span)
	}
}

// SinkFunc is a Sink as a function (no name is needed): SinkFunc(f) is a Sink whose Export calls
// f. It follows the contract of Sink.Export (concurrent; keep the spans, not the slice).
type SinkFunc func(ctx context.Context, spans []*Span) error

// Export calls f; a nil SinkFunc accepts and drops the spans.
func (f SinkFunc) Export(ctx context.Context, spans []*Span) error {
	if f == nil {
		return nil
	}
	return f(ctx, spans)
}
