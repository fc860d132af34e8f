package pebble

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/internal/changefeed"
)

// benchChangeSpans is how many spans BenchmarkChangeFeedQuery stores: $KELEMETRY_BENCH_CHANGE_SPANS,
// or 200,000 (10,000,000 is the figure of docs/performance.md).
func benchChangeSpans(b *testing.B) int {
	if v := os.Getenv("KELEMETRY_BENCH_CHANGE_SPANS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		return n
	}
	return 200_000
}

// fillChangeStore writes n spans over 24 hours ending at end (benchdata.Writes: writes of
// 20,000 Pods in 50 namespaces, 1% of them a person's patches, 2% failed conflicts); it returns
// the store.
func fillChangeStore(b *testing.B, n int, end time.Time) *Store {
	b.Helper()
	ctx := context.Background()
	p := openTestPebble(b, Config{}, nil)
	require.NoError(b, benchdata.Writes(benchdata.WritesConfig{}, n, end.Add(-24*time.Hour), end, func(spans []*aggregator.Span) error {
		return p.Export(ctx, spans)
	}))
	require.NoError(b, p.Sync(ctx))
	return p
}

// BenchmarkChangeFeedQuery: the newest page of the last 15 minutes over the whole cluster, with
// no filter, a person's writes (1%), one namespace (2%), failed writes (2%) and a user who wrote
// nothing (every entry of the range read), from a store of benchChangeSpans spans over a day
// (ns/op is the time of one query).
func BenchmarkChangeFeedQuery(b *testing.B) {
	n := benchChangeSpans(b)
	end := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	built := time.Now()
	p := fillChangeStore(b, n, end)
	size, err := p.diskUsage(true)
	require.NoError(b, err)
	b.Logf("stored %d spans in %s, %d MiB on disk", n, time.Since(built).Round(time.Millisecond), size>>20)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		q    changefeed.Query
	}{
		{"all", changefeed.Query{}},
		{"all-5000", changefeed.Query{Limit: changefeed.MaxLimit}},
		{"person", changefeed.Query{UserKinds: []string{changefeed.KindPerson}}},
		{"namespace", changefeed.Query{Namespace: "ns-7"}},
		{"failed", changefeed.Query{Outcome: changefeed.OutcomeFailed}},
		{"none", changefeed.Query{User: "nobody"}}, // the worst case: every entry of the range read
	} {
		b.Run(tc.name, func(b *testing.B) {
			q := tc.q
			q.From, q.To = end.Add(-15*time.Minute), end
			var page changefeed.Page
			for b.Loop() {
				var err error
				if page, err = p.ChangeFeed().Find(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(page.Changes)), "changes/op")
			b.ReportMetric(float64(page.Scanned), "scanned/op")
		})
	}
}
