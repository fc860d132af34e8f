package aggregator

import (
	"sync"

	"github.com/kelemetry/kelemetry/internal/instrument"
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
)

// The points of kelemetry.aggregator.events (a instrument.FixedCounter: one per event).
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

// linkerOpts caches linkerOpt's options by linker name (a handful).
var linkerOpts sync.Map

func linkerOpt(name string) []metric.AddOption {
	if o, ok := linkerOpts.Load(name); ok {
		return o.([]metric.AddOption)
	}
	o, _ := linkerOpts.LoadOrStore(name, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("linker", name)))})
	return o.([]metric.AddOption)
}

// The points of kelemetry.aggregator.spans (a instrument.FixedCounter), by SpanKind.
const (
	spanObject = iota
	spanLink
	spanEvent
	spanRequest
)

var spanKindSets = [...]attribute.Set{
	spanObject:  attribute.NewSet(attribute.String("kind", string(KindObject))),
	spanLink:    attribute.NewSet(attribute.String("kind", string(KindLink))),
	spanEvent:   attribute.NewSet(attribute.String("kind", string(KindEvent))),
	spanRequest: attribute.NewSet(attribute.String("kind", string(KindRequest))),
}

// countSpans adds spans to c by kind (the engine exports no other kinds).
func countSpans(c *instrument.FixedCounter, spans []*Span) {
	for _, sp := range spans {
		switch sp.Kind {
		case KindObject:
			c.Add(spanObject, 1)
		case KindLink:
			c.Add(spanLink, 1)
		case KindEvent:
			c.Add(spanEvent, 1)
		case KindRequest:
			c.Add(spanRequest, 1)
		}
	}
}
