package instrument

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestFixedCounter(t *testing.T) {
	r := sdkmetric.NewManualReader()
	m := NewMeter(telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}, "t")
	c := m.FixedCounter("x.events", "events", "{event}",
		attribute.NewSet(attribute.String("result", "sent")), attribute.NewSet(attribute.String("result", "filtered")))
	assert.NoError(t, m.Err())
	assert.ElementsMatch(t, []string{"result=sent 0", "result=filtered 0"}, points(t, r, "x.events"),
		"every set reported at 0 before its first Add")
	c.Add(0, 3)
	c.Add(1, 1)
	c.Add(0, 2)
	assert.Equal(t, int64(5), telemetrytest.Int64(t, r, "x.events", "result", "sent"))
	assert.Equal(t, int64(1), telemetrytest.Int64(t, r, "x.events", "result", "filtered"))
	assert.Equal(t, int64(5), telemetrytest.Int64(t, r, "x.events", "result", "sent"), "cumulative: collecting again reports the same")

	// Two counters of one name (a component made twice on one provider) report their sum.
	c2 := m.FixedCounter("x.events", "events", "{event}",
		attribute.NewSet(attribute.String("result", "sent")), attribute.NewSet(attribute.String("result", "filtered")))
	c2.Add(0, 10)
	assert.Equal(t, int64(15), telemetrytest.Int64(t, r, "x.events", "result", "sent"))

	plain := m.FixedCounter("x.plain", "", "")
	plain.Add(0, 7)
	assert.Equal(t, int64(7), telemetrytest.Int64(t, r, "x.plain", "", ""))
	assert.Equal(t, int64(7), plain.Value(0))
}

// points collects r and returns the points of the int64 sum name as "attributes value".
func points(t *testing.T, r *sdkmetric.ManualReader, name string) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var out []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					out = append(out, p.Attributes.Encoded(attribute.DefaultEncoder())+" "+strconv.FormatInt(p.Value, 10))
				}
			}
		}
	}
	return out
}
