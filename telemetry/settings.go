package telemetry

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Settings is what every constructor of Kelemetry takes for its logs and metrics. The zero value
// is valid: a nil Logger means slog.Default(), a nil MeterProvider means no metrics (a no-op
// provider). This holds everywhere, so a caller never has to guess.
type Settings struct {
	// Logger receives the component's logs; nil means slog.Default().
	Logger *slog.Logger
	// MeterProvider creates the component's instruments; nil means no metrics.
	MeterProvider metric.MeterProvider
}

// Log returns the logger (slog.Default() when none is set).
func (s Settings) Log() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// Provider returns the meter provider (a no-op one when none is set).
func (s Settings) Provider() metric.MeterProvider {
	if s.MeterProvider == nil {
		return noop.NewMeterProvider()
	}
	return s.MeterProvider
}

// With returns Settings whose logger carries the given attributes (e.g. "component", "audit").
func (s Settings) With(args ...any) Settings {
	s.Logger = s.Log().With(args...)
	return s
}
