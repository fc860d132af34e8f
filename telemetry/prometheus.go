package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/kelemetry/kelemetry/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"k8s.io/klog/v2"
)

// Prometheus is a meter provider whose instruments are served in the Prometheus text format.
type Prometheus struct {
	Provider *sdkmetric.MeterProvider
	Handler  http.Handler
}

// DefaultCardinalityLimit is the OpenTelemetry SDK's default cap of the attribute sets of one
// instrument: past it, measurements go to one series labelled otel_metric_overflow="true".
const DefaultCardinalityLimit = 2000

// CardinalityEnv is the SDK's variable that replaces DefaultCardinalityLimit (0 or less: none).
const CardinalityEnv = "OTEL_GO_X_CARDINALITY_LIMIT"

// CardinalityLimit is an SDK cardinality limit some instruments need so that the SDK never folds
// their series: the SDK's limit counts its own overflow series, so instruments that keep at most N
// attribute sets need N+1. Module's provider has at least the largest one provided to
// CardinalityGroup. Zero needs nothing.
type CardinalityLimit int

// CardinalityGroup is the fx value group tag of the CardinalityLimits Module honours.
const CardinalityGroup = `group:"kelemetry.telemetry.cardinality"`

// sdkCardinalityLimit returns the cardinality limit of a provider whose instruments need the given
// limits: the largest of them and of the SDK's (DefaultCardinalityLimit, or CardinalityEnv when
// set: 0 or less there means no limit, which is kept).
func sdkCardinalityLimit(need ...CardinalityLimit) int {
	limit := DefaultCardinalityLimit
	if v := strings.TrimSpace(os.Getenv(CardinalityEnv)); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			limit = n
		}
	}
	if limit <= 0 {
		return 0
	}
	for _, n := range need {
		limit = max(limit, int(n))
	}
	return limit
}

// prometheusOption configures NewPrometheus.
type prometheusOption func(*prometheusOptions)

type prometheusOptions struct {
	need []CardinalityLimit
}

// withCardinality makes the provider keep at least limit attribute sets per instrument (see
// sdkCardinalityLimit); without it the SDK's default applies.
func withCardinality(limit CardinalityLimit) prometheusOption {
	return func(o *prometheusOptions) { o.need = append(o.need, limit) }
}

// NewPrometheus creates a meter provider with its own Prometheus registry (no global state), plus
// the Go runtime and process collectors. Its cardinality limit per instrument is
// sdkCardinalityLimit of the withCardinality options.
func NewPrometheus(opts ...prometheusOption) (*Prometheus, error) {
	var o prometheusOptions
	for _, opt := range opts {
		opt(&o)
	}
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
	res, err := serviceResource()
	if err != nil {
		return nil, err
	}
	return &Prometheus{
		Provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res),
			sdkmetric.WithCardinalityLimit(sdkCardinalityLimit(o.need...))),
		Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// serviceResource describes the process in target_info: service.name kelemetry and
// service.version the build's version, the SDK's attributes, and what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say (which win).
func serviceResource() (*resource.Resource, error) {
	res, err := resource.New(context.Background(),
		resource.WithAttributes(attribute.String("service.name", "kelemetry"), attribute.String("service.version", version.Get().Version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("metrics resource: %w", err)
	}
	return res, nil
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
