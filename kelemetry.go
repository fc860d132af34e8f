// Package kelemetry bundles Kelemetry's parts into one fx application, the one the all-in-one
// binary (examples/allinone) runs: audit sources and queues, the aggregator and its linkers
// (owner references, the parent-link annotation, link rules, linkers in their own process),
// diffs, Kubernetes Events and informer diffs, trace storage, optional OTLP export, kelemetrix's
// metrics of the audit stream, the query APIs, the storage API and the web UI.
//
// Config is the whole application's configuration (YAML as in deploy/allinone.yaml, read by
// LoadConfig; unknown keys are errors), and fans out into the parts' own configurations.
// Module lists the parts' own modules (telemetry, httpserver, kube, store, otlpsink, aggregator,
// audit, kelemetrix, event, linker, linkrule, remotelinker, diff/informer, frontend, ui,
// storageapi); Modules(role) is the same for one role: roleIngest without the query side,
// roleQuery without the ingest side, for replicas that share a store through the jaeger
// backend. Health is the body of GET /healthz. A binary can also compose any subset of the parts
// instead (see docs/sdk/compose.md). A platform team's own binary is
//
//	fx.New(
//		kelemetry.Module,
//		fx.Supply(cfg), // a kelemetry.Config
//		fx.Provide(kelemetry.AsLinker(NewMyLinker)),
//	).Run()
//
// The aliases below name the extension points (Linker, Decorator, Sink, ...) and their
// registration helpers without importing the aggregator package.
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
