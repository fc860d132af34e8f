package telemetrytest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/internal/telemetrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInt64(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m := mp.Meter("test")
	c, _ := m.Int64Counter("c")
	c.Add(context.Background(), 2, metric.WithAttributes(attribute.String("reason", "a")))
	c.Add(context.Background(), 3, metric.WithAttributes(attribute.String("reason", "b")))
	_, _ = m.Int64ObservableGauge("g", metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
		o.Observe(7)
		return nil
	}))
	assert.Equal(t, int64(5), telemetrytest.Int64(t, r, "c", "", ""))
	assert.Equal(t, int64(3), telemetrytest.Int64(t, r, "c", "reason", "b"))
	assert.Equal(t, int64(7), telemetrytest.Int64(t, r, "g", "", ""))
	assert.Zero(t, telemetrytest.Int64(t, r, "missing", "", ""))
}

func TestPoints(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m := mp.Meter("test")
	c, _ := m.Int64Counter("c")
	c.Add(context.Background(), 0, metric.WithAttributes(attribute.String("reason", "a")))
	c.Add(context.Background(), 0, metric.WithAttributes(attribute.String("reason", "b")))
	assert.Equal(t, telemetrytest.Zeros("reason", "a", "b"), telemetrytest.Points(t, r, "c"), "the zeros are kept")
	c.Add(context.Background(), 2, metric.WithAttributes(attribute.String("reason", "b"), attribute.String("api", "ui")))
	assert.Equal(t, map[string]int64{"reason=a": 0, "reason=b": 0, "api=ui,reason=b": 2}, telemetrytest.Points(t, r, "c"))
	plain, _ := m.Int64Counter("plain")
	plain.Add(context.Background(), 0)
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, r, "plain"))
	assert.Empty(t, telemetrytest.Points(t, r, "missing"))
}
