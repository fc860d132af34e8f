package httpserver

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	healthpkg "github.com/kelemetry/kelemetry/health"
)

// registerReadyGauge reports each readiness check as kelemetry.ready (1 passing, 0 failing, by
// check) when the metrics are collected, so that an alert sees what /readyz answers (the
// PrometheusRule's KelemetrySinksNotReady). The checks are cheap and bounded (health.Check).
func registerReadyGauge(mp metric.MeterProvider, checks []healthpkg.Check) (metric.Registration, error) {
	if mp == nil || len(checks) == 0 {
		return nil, nil
	}
	m := mp.Meter(meterScope)
	g, err := m.Int64ObservableGauge("kelemetry.ready",
		metric.WithDescription("Readiness checks (/readyz), by check: 1 passing, 0 failing."), metric.WithUnit("{check}"))
	if err != nil {
		return nil, err
	}
	sets := make(map[string]metric.ObserveOption, len(checks))
	for _, c := range checks {
		sets[c.Name] = metric.WithAttributeSet(attribute.NewSet(attribute.String("check", c.Name)))
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, r := range healthpkg.Run(ctx, checks) {
			v := int64(1)
			if r.Err != nil {
				v = 0
			}
			o.ObserveInt64(g, v, sets[r.Name])
		}
		return nil
	}, g)
}
