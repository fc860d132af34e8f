package linker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
)

// The linkers' counters are exported at 0 from the start, each source and reason included; a
// lookup counts under the source it used.
func TestLinkerCountersStartAtZero(t *testing.T) {
	r := sdkmetric.NewManualReader()
	ts := quiet
	ts.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	NewOwnerLinker(nil, nil, ts)
	annotation := NewAnnotationLinker(nil, ts)
	sources := telemetrytest.Zeros("source", "none", "body", "getter", "not_found")
	assert.Equal(t, sources, telemetrytest.Points(t, r, "kelemetry.linker.owner.lookups"))
	assert.Equal(t, sources, telemetrytest.Points(t, r, "kelemetry.linker.annotation.lookups"))
	assert.Equal(t, telemetrytest.Zeros("reason", "json", "missing_field", "self"), telemetrytest.Points(t, r, "kelemetry.linker.annotation.invalid"))

	_, err := annotation.Lookup(context.Background(), aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Name: "p"}})
	assert.NoError(t, err)
	assert.Equal(t, map[string]int64{"none": 1}, telemetrytest.Int64By(t, r, "kelemetry.linker.annotation.lookups", "source"))
}
