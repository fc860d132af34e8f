// Package telemetrytest reads metrics in tests: a manual reader's int64 counters, up-down
// counters and gauges, summed over their points.
package telemetrytest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Int64 collects r and returns the sum of the points of the int64 sum or gauge name whose
// attribute key is value (an empty key: every point). It fails the test for a metric of another
// type.
func Int64(t testing.TB, r *sdkmetric.ManualReader, name, key, value string) int64 {
	t.Helper()
	if key == "" {
		var total int64
		for _, v := range Int64By(t, r, name, "") {
			total += v
		}
		return total
	}
	return Int64By(t, r, name, key)[value]
}

// Int64By collects r and returns the sums of the points of the int64 sum or gauge name by the
// value of their attribute key (an empty key: every point under ""), leaving out a counter's
// values that are still 0 (counters export their known attribute sets at 0 from the start). It
// fails the test for a metric of another type.
func Int64By(t testing.TB, r *sdkmetric.ManualReader, name, key string) map[string]int64 {
	t.Helper()
	points, monotonic := int64Points(t, r, name)
	out := map[string]int64{}
	for _, p := range points {
		var v string
		if key != "" {
			a, _ := p.Attributes.Value(attribute.Key(key))
			v = a.AsString()
		}
		out[v] += p.Value
	}
	for k, v := range out {
		if v == 0 && monotonic {
			delete(out, k)
		}
	}
	return out
}

// int64Points collects r and returns the points of the int64 sum or gauge name, and whether it
// is a counter (monotonic sum). It fails the test for a metric of another type.
func int64Points(t testing.TB, r *sdkmetric.ManualReader, name string) ([]metricdata.DataPoint[int64], bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	var out []metricdata.DataPoint[int64]
	monotonic := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				out, monotonic = append(out, d.DataPoints...), d.IsMonotonic
			case metricdata.Gauge[int64]:
				out = append(out, d.DataPoints...)
			default:
				t.Fatalf("metric %s has data %T", name, m.Data)
			}
		}
	}
	return out, monotonic
}

// Sums collects r and returns the sums of every int64 sum and gauge, keyed by metric name, or by
// "name{attr=value}" for the points that carry attr (an empty attr: by name only), leaving out
// a counter's points that are still 0.
func Sums(t testing.TB, r *sdkmetric.ManualReader, attr string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var points []metricdata.DataPoint[int64]
			monotonic := false
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points, monotonic = d.DataPoints, d.IsMonotonic
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
			for _, p := range points {
				if monotonic && p.Value == 0 {
					continue // a counter's known attribute set, exported at 0 from the start
				}
				key := m.Name
				if v, ok := p.Attributes.Value(attribute.Key(attr)); ok && attr != "" {
					key += "{" + attr + "=" + v.AsString() + "}"
				}
				out[key] += p.Value
			}
		}
	}
	return out
}

// Points collects r and returns the points of the int64 sum or gauge name by their attributes
// ("k1=v1,k2=v2" sorted by key, "" for none), a counter's points at 0 included: what a test of
// the sets exported from the start compares. It fails the test for a metric of another type.
func Points(t testing.TB, r *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	points, _ := int64Points(t, r, name)
	out := map[string]int64{}
	for _, p := range points {
		out[p.Attributes.Encoded(attribute.DefaultEncoder())] += p.Value
	}
	return out
}

// Zeros returns the map of Points of sets all at 0: Zeros("reason", "full", "stopped") is
// {"reason=full": 0, "reason=stopped": 0}, and Zeros("") the single point without attributes.
func Zeros(key string, values ...string) map[string]int64 {
	if key == "" {
		return map[string]int64{"": 0}
	}
	out := make(map[string]int64, len(values))
	for _, v := range values {
		out[key+"="+v] = 0
	}
	return out
}
