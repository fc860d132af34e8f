package telemetry

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
)

// moduleParams are the fx inputs of Module; both are optional.
type moduleParams struct {
	fx.In

	// Logger is the application's logger (default slog.Default()).
	Logger *slog.Logger `optional:"true"`
	// MeterProvider replaces the built-in Prometheus provider; /metrics is then not served.
	MeterProvider metric.MeterProvider `optional:"true"`
	Lifecycle     fx.Lifecycle
	// Cardinality are the attribute sets per instrument the built-in provider must keep at least
	// (kelemetrix.Module provides its metrics' maxSeries); they do not apply to MeterProvider.
	Cardinality []CardinalityLimit `group:"kelemetry.telemetry.cardinality"`
}

// moduleResult is what Module provides.
type moduleResult struct {
	fx.Out

	Settings Settings
	// Prometheus is nil when the application supplied its own MeterProvider. Package httpserver's
	// Module serves its Handler at GET /metrics on the API listener.
	Prometheus *Prometheus
}

// newModule builds the application's Settings for Module.
func newModule(p moduleParams) (moduleResult, error) {
	s := Settings{Logger: p.Logger, MeterProvider: p.MeterProvider}
	s.Logger = s.Log()
	if p.MeterProvider != nil {
		return moduleResult{Settings: s}, nil
	}
	var opts []prometheusOption
	for _, c := range p.Cardinality {
		opts = append(opts, withCardinality(c))
	}
	prom, err := NewPrometheus(opts...)
	if err != nil {
		return moduleResult{}, err
	}
	if p.Lifecycle != nil {
		p.Lifecycle.Append(fx.StopHook(prom.Shutdown))
	}
	s.MeterProvider = prom.Provider
	return moduleResult{Settings: s, Prometheus: prom}, nil
}

// Module provides Settings, and the Prometheus provider unless the application supplies a
// metric.MeterProvider. It serves nothing itself: httpserver.Module mounts the provider's
// GET /metrics on the API listener.
var Module = fx.Module("telemetry", fx.Provide(newModule))
