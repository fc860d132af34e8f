package query

import (
	"fmt"
	"log/slog"
	"net/http"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Serve prepares e for serving (it logs its memory budget and registers its gauge, unregistered
// when lc, if given, stops) and returns the handler of the native, Jaeger-compatible and UI APIs
// over it: the routes of NativeAPI (reading reader, with e's limits), JaegerAPI and UIAPI.
func Serve(e *Engine, reader store.Reader, tel telemetry.Settings, lc fx.Lifecycle) httpserver.Handler {
	logMemoryBudget(tel.Log().With("component", "frontend"), e)
	reg := instrument.NewMeter(tel, meterScope).Gauge("kelemetry.frontend.queries.memory",
		"Estimated memory the heavy queries running hold (their admission estimates and what they grew by), within frontend.Config.MaxMemoryBytes.", "By",
		func() (int64, bool) { return e.limiter.reservedBytes(), true })
	if lc != nil {
		lc.Append(fx.StopHook(reg.Unregister))
	}
	native := NewNativeAPI(reader, tel).ShareLimits(e)
	jaeger := NewJaegerAPI(e, tel)
	ui := NewUIAPI(e, tel)
	return httpserver.HandlerFunc(func(mux *http.ServeMux) {
		native.Register(mux)
		jaeger.Register(mux)
		ui.Register(mux)
	})
}

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
