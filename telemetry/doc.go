// Package telemetry is how Kelemetry's parts log and count. Every constructor takes a Settings
// (a *slog.Logger and a metric.MeterProvider, where nil means slog.Default() and no metrics), and
// creates its instruments from its MeterProvider (Kelemetry's own packages through
// internal/instrument, one way for all).
//
// Module builds the Settings of an application: it uses the *slog.Logger and the
// metric.MeterProvider the application supplies (fx.Supply), and otherwise slog.Default() and a
// Prometheus meter provider (httpserver.Module serves it at GET /metrics on the API listener:
// telemetry depends on no other part of Kelemetry). A user's own MeterProvider therefore needs no
// fx.Replace: supplying it is enough. RouteKlog sends client-go's klog output to slog.
//
// Meter creates every kind of instrument with a name, a description and a unit, keeps their
// errors for one check (Err), and replaces an instrument it cannot create with a no-op one, so a
// metric never stops the pipeline. FixedCounter is the counter for hot paths: its attribute sets
// are chosen up front and an Add is one atomic add. NewPrometheus builds the Prometheus provider
// (with the Go runtime and process collectors); its cardinality limit per instrument is raised
// for parts that need more series than the SDK's default (CardinalityLimit, CardinalityGroup:
// kelemetrix's maxSeries).
package telemetry
