package aggregator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The engine's counters are exported at 0 from the start, the linkers it was built with included,
// so that an increase() over them sees the first occurrence.
func TestCountersStartAtZero(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Telemetry: telemetry.Settings{MeterProvider: mp},
		Linkers: []aggregator.Linker{&aggregatortest.StaticLinker{LinkerName: "owner"}, &aggregatortest.StaticLinker{LinkerName: "rules"}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	byLinker := telemetrytest.Zeros("linker", "owner", "rules")
	for name, want := range map[string]map[string]int64{
		"kelemetry.aggregator.link.errors":         byLinker,
		"kelemetry.aggregator.links":               byLinker,
		"kelemetry.aggregator.link.export.retries": telemetrytest.Zeros(""),
		"kelemetry.aggregator.spancache.evictions": telemetrytest.Zeros(""),
		"kelemetry.aggregator.export.errors":       telemetrytest.Zeros(""),
		"kelemetry.aggregator.link.jobs":           telemetrytest.Zeros("result", "queued", "dropped", "done", "depth_limit"),
		"kelemetry.aggregator.events":              telemetrytest.Zeros("result", "invalid", "export_error", "ok"),
		"kelemetry.aggregator.spans":               telemetrytest.Zeros("kind", "object", "link", "event", "request"),
	} {
		assert.Equal(t, want, telemetrytest.Points(t, r, name), name)
	}
}
