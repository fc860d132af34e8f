package frontend

import (
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Engine is the query engine: it finds objects, follows their links and merges their windows,
// within the budgets and the limit of concurrent heavy requests of its Config. Package
// storageapi serves it over gRPC.
type Engine = query.Engine

// NewEngine returns an engine over r, whose traces have windows of length w. The APIs built
// on it share its limits of heavy requests (Config.MaxConcurrent, Config.MaxMemoryBytes,
// resolved against the Go memory limit set now).
func NewEngine(r store.Reader, w aggregator.Window, cfg Config) *Engine {
	return query.NewEngine(r, w, cfg.engine())
}

// Params are the fx inputs of New.
type Params struct {
	fx.In

	// Reader is the store the frontend reads (store.Module provides it).
	Reader    store.Reader
	Config    Config             `optional:"true"`
	Window    aggregator.Window  `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	// Lifecycle, when given, unregisters the engine's gauge at stop.
	Lifecycle fx.Lifecycle `optional:"true"`
}

// Result is what New provides.
type Result struct {
	fx.Out

	Engine *Engine
	// Handler serves the native, Jaeger-compatible and UI APIs on the API listener.
	Handler httpserver.Handler `group:"kelemetry.http.api"`
}

// New builds the query engine over p.Reader and its HTTP APIs: the native API (what is stored,
// an object over time), Jaeger Query's HTTP API and the web UI's API; mount them on any mux
// with Handler.Register. The APIs share the engine's budgets and its limit of concurrent heavy
// requests. It fails on an invalid p.Config.
func New(p Params) (Result, error) {
	if err := p.Config.Validate(); err != nil {
		return Result{}, err
	}
	e := NewEngine(p.Reader, p.Window, p.Config)
	return Result{Engine: e, Handler: query.Serve(e, p.Reader, p.Telemetry, p.Lifecycle)}, nil
}

// Module provides the query engine and serves its APIs on the API listener (with
// httpserver.Module). It needs a store.Reader; the web UI's pages come with ui.Module.
var Module = fx.Module("frontend", fx.Provide(New))
