// Package kelemetry bundles the built-in parts of Kelemetry into one fx application: audit
// sources, the aggregator, the built-in linkers, trace storage, optional OTLP export, the HTTP
// API and the web UI. Module only lists the parts' own modules (telemetry, httpserver, kube, store,
// otlpsink, aggregator, audit, event, linker, linkrule, diff/informer, frontend, ui) and fans
// Config out into their configurations; a binary can compose any subset of them instead (see the
// docs/sdk/compose.md). A platform team's own binary is
//
//	fx.New(
//		kelemetry.Module,
//		fx.Supply(cfg), // a kelemetry.Config
//		fx.Provide(aggregator.AsLinker(NewMyLinker)),
//	).Run()
//
// The aliases below name the extension points without importing the aggregator package.
package kelemetry

import (
	"github.com/kelemetry/kelemetry/aggregator"
)

// Extension points, re-exported from package aggregator.
type (
	// Aggregator places events in object traces.
	Aggregator = aggregator.Aggregator
	// Linker finds related objects.
	Linker = aggregator.Linker
	// Decorator changes spans before export.
	Decorator = aggregator.Decorator
	// Sink receives finished spans.
	Sink = aggregator.Sink
	// Event is what a source sends.
	Event = aggregator.Event
	// Span is what sinks receive.
	Span = aggregator.Span
)

// Registration helpers and function adapters, re-exported from package aggregator.
var (
	AsLinker     = aggregator.AsLinker
	AsDecorator  = aggregator.AsDecorator
	AsSink       = aggregator.AsSink
	NewLinker    = aggregator.NewLinker
	NewDecorator = aggregator.NewDecorator
)

// SinkFunc is a function that is a Sink (aggregator.SinkFunc).
type SinkFunc = aggregator.SinkFunc
