package aggregator

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The measurement options of the engine's counters, made once and passed as slices (opts...):
// building an attribute set per event was a tenth of the allocations of the pipeline, and a
// variadic argument built at the call is one more allocation per Add.
var (
	resultDropped    = resultOpt("dropped")
	resultQueued     = resultOpt("queued")
	resultDone       = resultOpt("done")
	resultDepthLimit = resultOpt("depth_limit")

	kindObject = kindOpt(KindObject)
	kindLink   = kindOpt(KindLink)
	kindEvent  = kindOpt(KindEvent)
)

// The points of kelemetry.aggregator.events (a telemetry.FixedCounter: one per event).
const (
	eventInvalid = iota
	eventExportError
	eventOK
)

var eventResultSets = [...]attribute.Set{
	eventInvalid:     attribute.NewSet(attribute.String("result", "invalid")),
	eventExportError: attribute.NewSet(attribute.String("result", "export_error")),
	eventOK:          attribute.NewSet(attribute.String("result", "ok")),
}

func resultOpt(v string) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("result", v)))}
}

func kindOpt(k SpanKind) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", string(k))))}
}

// linkerOpts caches linkerOpt's options by linker name (a handful).
var linkerOpts sync.Map

func linkerOpt(name string) []metric.AddOption {
	if o, ok := linkerOpts.Load(name); ok {
		return o.([]metric.AddOption)
	}
	o, _ := linkerOpts.LoadOrStore(name, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("linker", name)))})
	return o.([]metric.AddOption)
}

// countSpans adds spans to c by kind: one Add per kind present.
func countSpans(ctx context.Context, c metric.Int64Counter, spans []*Span) {
	var objects, links, events int64
	for _, sp := range spans {
		switch sp.Kind {
		case KindObject:
			objects++
		case KindLink:
			links++
		case KindEvent:
			events++
		default:
			c.Add(ctx, 1, kindOpt(sp.Kind)...)
		}
	}
	for _, k := range [...]struct {
		n   int64
		opt []metric.AddOption
	}{{objects, kindObject}, {links, kindLink}, {events, kindEvent}} {
		if k.n > 0 {
			c.Add(ctx, k.n, k.opt...)
		}
	}
}
