package instrument

import (
	"context"
	"log/slog"
	"testing"

	"github.com/kelemetry/kelemetry/telemetry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestSettingsZeroValue(t *testing.T) {
	var s telemetry.Settings
	assert.Same(t, slog.Default(), s.Log())
	require.NotNil(t, s.Provider())
	m := NewMeter(s, "test")
	m.Counter("c", "", "").Add(context.Background(), 1)
	assert.NoError(t, m.Err())
}

func TestSettingsMeterRecords(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := telemetry.Settings{MeterProvider: mp}.With("component", "test")
	require.NotNil(t, s.Logger)

	m := NewMeter(s, "github.com/kelemetry/kelemetry/telemetry")
	m.Counter("kelemetry.test.events", "Events.", "{event}").Add(context.Background(), 2)
	reg := m.Gauge("kelemetry.test.depth", "Depth.", "", func() (int64, bool) { return 7, true })
	m.Gauge("kelemetry.test.closed", "Observes nothing.", "", func() (int64, bool) { return 1, false })
	require.NoError(t, m.Err())

	collect := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, md := range sm.Metrics {
				switch d := md.Data.(type) {
				case metricdata.Sum[int64]:
					got[md.Name] = d.DataPoints[0].Value
				case metricdata.Gauge[int64]:
					if len(d.DataPoints) > 0 {
						got[md.Name] = d.DataPoints[0].Value
					}
				}
			}
		}
		return got
	}
	assert.Equal(t, map[string]int64{"kelemetry.test.events": 2, "kelemetry.test.depth": 7}, collect())
	require.NoError(t, reg.Unregister())
	assert.Equal(t, map[string]int64{"kelemetry.test.events": 2}, collect(), "an unregistered gauge is no longer read")
}

func TestCounterInitialSets(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m := NewMeter(telemetry.Settings{MeterProvider: mp}, "test")
	m.Counter("x.rejected", "Rejections, by reason.", "", Sets("reason", "full", "stopped")...)
	require.NoError(t, m.Err())
	assert.ElementsMatch(t, []string{"reason=full 0", "reason=stopped 0"}, points(t, reader, "x.rejected"))
	assert.Empty(t, Sets("reason"))
}
