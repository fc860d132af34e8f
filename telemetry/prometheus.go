package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"k8s.io/klog/v2"
)

// Prometheus is a meter provider whose instruments are served in the Prometheus text format.
type Prometheus struct {
	Provider *sdkmetric.MeterProvider
	Handler  http.Handler
}

// NewPrometheus creates a meter provider with its own Prometheus registry (no global state), plus
// the Go runtime and process collectors.
func NewPrometheus() (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register collector: %w", err)
		}
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	return &Prometheus{
		Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		Handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// Shutdown stops the meter provider.
func (m *Prometheus) Shutdown(ctx context.Context) error {
	if err := m.Provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("meter provider: %w", err)
	}
	return nil
}

// RouteKlog sends klog's output (client-go's logs) to logger.
func RouteKlog(logger *slog.Logger) {
	klog.SetSlogLogger(logger.With("source", "klog"))
}
