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
	return query.NewEngine(r, w, cfg)
}

// Deps are what New needs besides its Config.
type Deps struct {
	// Reader is the store the frontend reads (store.Module provides it).
	Reader store.Reader
	// Window is the length of the traces' windows (zero: aggregator.DefaultWindow).
	Window aggregator.Window
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry telemetry.Settings
}

// New builds the query engine over deps.Reader and its HTTP APIs: the native API (what is
// stored, an object over time), Jaeger Query's HTTP API and the web UI's API; mount them on any
// mux with the handler's Register. The APIs share the engine's budgets and its limit of
// concurrent heavy requests. It fails on an invalid cfg. This is Module without fx.
func New(cfg Config, deps Deps) (*Engine, httpserver.Handler, error) {
	return build(cfg, deps, nil)
}

// build is New; lc, when not nil, unregisters the engine's gauge at stop.
func build(cfg Config, deps Deps, lc fx.Lifecycle) (*Engine, httpserver.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	e := NewEngine(deps.Reader, deps.Window, cfg)
	return e, query.Serve(e, deps.Reader, deps.Telemetry, lc), nil
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	// Reader is the store the frontend reads (store.Module provides it).
	Reader    store.Reader
	Config    Config             `optional:"true"`
	Window    aggregator.Window  `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Engine *Engine
	// Handler serves the native, Jaeger-compatible and UI APIs on the API listener.
	Handler httpserver.Handler `group:"kelemetry.http.api"`
}

// newModule builds the engine and its APIs (New) for Module; the engine's gauge is unregistered
// at stop.
func newModule(p moduleParams) (moduleResult, error) {
	e, h, err := build(p.Config, Deps{Reader: p.Reader, Window: p.Window, Telemetry: p.Telemetry}, p.Lifecycle)
	if err != nil {
		return moduleResult{}, err
	}
	return moduleResult{Engine: e, Handler: h}, nil
}

// Module provides the query engine and serves its APIs on the API listener (with
// httpserver.Module). It needs a store.Reader; the web UI's pages come with ui.Module.
var Module = fx.Module("frontend", fx.Provide(newModule))
