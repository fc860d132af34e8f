package pebble

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
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

// fillChangeStore writes n spans over 24 hours ending at end: writes of 20,000 Pods in 50
// namespaces (each object's window starting with its object span), 1% of them a person's
// patches, 2% failed conflicts; it returns the store.
func fillChangeStore(b *testing.B, n int, end time.Time) *Store {
	b.Helper()
	ctx := context.Background()
	p := openTestPebble(b, Config{}, nil)
	start := end.Add(-24 * time.Hour)
	step := 24 * time.Hour / time.Duration(n)
	const objects = 20_000
	seen := map[[2]int64]bool{}
	batch := make([]*aggregator.Span, 0, 5000)
	for i := range n {
		at := start.Add(time.Duration(i) * step)
		o := i * 7919 % objects
		obj := aggregator.ObjectRef{Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "ns-" + strconv.Itoa(o%50), Name: "pod-" + strconv.Itoa(o)}
		w := aggregator.WindowStart(at, win)
		tid := aggregator.TraceIDFor(obj.Key(), w)
		if k := [2]int64{int64(o), w.UnixNano()}; !seen[k] {
			seen[k] = true
			batch = append(batch, objectSpan(obj, w))
		}
		user, agent, verb, code := "system:serviceaccount:kube-system:replicaset-controller", "kube-controller-manager/v1.37.2", "update", "200"
		switch {
		case i%100 == 0:
			user, agent, verb = "alice", "kubectl/v1.37.2 (linux/amd64)", "patch"
		case i%50 == 1:
			code = "409"
		}
		var sid trace.SpanID
		copy(sid[:], fmt.Sprintf("%08d", i%100_000_000))
		batch = append(batch, &aggregator.Span{TraceID: tid, SpanID: sid, ParentID: trace.SpanID{1}, Kind: aggregator.KindEvent, Source: "audit",
			Name: user + " " + verb, Object: obj, Window: w, Start: at, End: at.Add(5 * time.Millisecond), Error: code != "200",
			Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: verb}, {Key: aggregator.AttrUser, Value: user},
				{Key: aggregator.AttrUserAgent, Value: agent}, {Key: aggregator.AttrStatusCode, Value: code}, {Key: aggregator.AttrAuditID, Value: strconv.Itoa(i)}},
			Logs: []aggregator.Log{{Time: at, Type: aggregator.LogTypeDiff, Message: "status.phase Pending -> Running",
				Attributes: aggregator.Attrs{{Key: diff.AttrPath, Value: "status.phase"}}}}})
		if len(batch) >= 5000 {
			require.NoError(b, p.Export(ctx, batch))
			batch = batch[:0]
		}
	}
	require.NoError(b, p.Export(ctx, batch))
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
