package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// BenchmarkTreeTraceRead reads what drawing the 10,000-pod Deployment tree reads from the store:
// its objects' windows (FindExact) and their 40,008 traces (GetTraces), written in a burst at the
// start of each of 4 windows among 1 million writes of other objects over 2 hours, the store
// reopened (a cold block cache for the first read).
func BenchmarkTreeTraceRead(b *testing.B) {
	ctx := context.Background()
	p := openTestPebble(b, Config{}, nil)
	w0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	require.NoError(b, benchdata.Writes(benchdata.WritesConfig{Batch: 500}, 1_000_000, w0, w0.Add(2*time.Hour),
		func(spans []*aggregator.Span) error { return p.Export(ctx, spans) }))
	var keys []aggregator.ObjectKey
	seen := map[aggregator.ObjectKey]bool{}
	for _, spans := range benchdata.Deployment("prod", "tree", 10000, 4, w0) {
		for i := 0; i < len(spans); i += 500 {
			require.NoError(b, p.Export(ctx, spans[i:min(i+500, len(spans))]))
		}
		for _, sp := range spans {
			if k := sp.Object.Key(); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	require.NoError(b, p.Sync(ctx))
	dir := p.cfg.Dir
	require.NoError(b, p.close())
	p = openTestPebble(b, Config{Dir: dir}, nil)
	traces := 0
	b.ResetTimer()
	for b.Loop() {
		found, err := p.FindExact(ctx, keys, w0, w0.Add(4*aggregator.DefaultWindow-1))
		require.NoError(b, err)
		var ws []query.ObjectWindow
		for _, f := range found {
			ws = append(ws, f.Windows...)
		}
		got, err := p.GetTraces(ctx, ws)
		require.NoError(b, err)
		n := 0
		for _, t := range got {
			n += len(t)
		}
		require.Greater(b, n, len(ws))
		traces = len(ws)
	}
	b.ReportMetric(float64(traces), "traces")
}
