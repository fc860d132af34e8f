// Package telemetry is how Kelemetry's parts log and count. Every constructor takes a Settings
// (a *slog.Logger and a metric.MeterProvider, where nil means slog.Default() and no metrics), and
// creates its instruments through Settings.Meter, one way for all.
//
// Module builds the Settings of an application: it uses the *slog.Logger and the
// metric.MeterProvider the application supplies (fx.Supply), and otherwise slog.Default() and a
// Prometheus meter provider served at GET /metrics on the API listener. A user's own
// MeterProvider therefore needs no fx.Replace: supplying it is enough. RouteKlog sends client-go's
// klog output to slog.
package telemetry
