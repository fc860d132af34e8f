package frontend

import (
	"fmt"
	"log/slog"
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

// New builds the query engine over p.Reader and its HTTP APIs. The handler's routes are those of
// NativeAPI, JaegerAPI and UIAPI; mount them on any mux with Handler.Register. The APIs share
// the engine's budgets and its limit of concurrent heavy requests. It fails on an invalid
// p.Config.
func New(p Params) (Result, error) {
	if err := p.Config.Validate(); err != nil {
		return Result{}, err
	}
	e := NewEngine(p.Reader, p.Window, p.Config)
	logMemoryBudget(p.Telemetry.Log().With("component", "frontend"), e)
	reg := p.Telemetry.Meter(meterScope).Gauge("kelemetry.frontend.queries.memory",
		"Estimated memory the heavy queries running hold (their admission estimates and what they grew by), within frontend.Config.MaxMemoryBytes.", "By",
		func() (int64, bool) { return e.limiter.reservedBytes(), true })
	if p.Lifecycle != nil {
		p.Lifecycle.Append(fx.StopHook(reg.Unregister))
	}
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

// logMemoryBudget says once, at start, how much memory the heavy queries may hold and why.
func logMemoryBudget(logger *slog.Logger, e *Engine) {
	cfg := e.Config()
	switch b := e.MemoryBudget(); {
	case b == 0 && cfg.MaxMemoryBytes < 0:
		logger.Info("query memory budget: none (query.maxMemoryBytes -1)", "maxConcurrent", cfg.MaxConcurrent)
	case b == 0:
		logger.Info("query memory budget: none (no Go memory limit; set GOMEMLIMIT, memoryLimit or query.maxMemoryBytes)", "maxConcurrent", cfg.MaxConcurrent)
	case cfg.MaxMemoryBytes > 0:
		logger.Info("query memory budget from query.maxMemoryBytes", "bytes", b, "perQuery", b/int64(cfg.MaxConcurrent), "maxConcurrent", cfg.MaxConcurrent)
	default:
		logger.Info(fmt.Sprintf("query memory budget: %d%% of the Go memory limit", defaultMemoryPercent), "bytes", b,
			"goMemLimit", goMemoryLimit(), "perQuery", b/int64(cfg.MaxConcurrent), "maxConcurrent", cfg.MaxConcurrent)
	}
}
