package frontend

import (
	"net/http"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Params are the fx inputs of New.
type Params struct {
	fx.In

	// Reader is the store the frontend reads (store.Module provides it).
	Reader    store.Reader
	Config    Config             `optional:"true"`
	Window    aggregator.Window  `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
}

// Result is what New provides.
type Result struct {
	fx.Out

	Engine *Engine
	// Handler serves the native, Jaeger-compatible and UI APIs on the API listener.
	Handler httpserver.Handler `group:"kelemetry.http.api"`
}

// New builds the query engine over p.Reader and its HTTP APIs. The handler's routes are those of
// NativeAPI, JaegerAPI and UIAPI; mount them on any mux with Handler.Register. The APIs share
// the engine's budgets and its limit of concurrent heavy requests. It fails on an invalid
// p.Config.
func New(p Params) (Result, error) {
	if err := p.Config.Validate(); err != nil {
		return Result{}, err
	}
	e := NewEngine(p.Reader, p.Window, p.Config)
	native := NewNativeAPI(p.Reader, p.Telemetry).ShareLimits(e)
	jaeger := NewJaegerAPI(e, p.Telemetry)
	ui := NewUIAPI(e, p.Telemetry)
	return Result{Engine: e, Handler: httpserver.HandlerFunc(func(mux *http.ServeMux) {
		native.Register(mux)
		jaeger.Register(mux)
		ui.Register(mux)
	})}, nil
}

// Module provides the query engine and serves its APIs on the API listener (with
// httpserver.Module). It needs a store.Reader; the web UI's pages come with ui.Module.
var Module = fx.Module("frontend", fx.Provide(New))
