package query_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// BenchmarkChangesFollow: writes stored at a paced rate (5,000 and 20,000 a second, in batches of
// 100) reach 1 and 10 live tails (GET /api/changes?follow=1 over HTTP, each reading every change);
// none may be cut off. writes/s is the rate the tails took them at, end to end; lag-ms how long
// after the last write the slowest tail had it.
func BenchmarkChangesFollow(b *testing.B) {
	for _, tc := range []struct{ tails, rate int }{{1, 5000}, {10, 5000}, {10, 20000}} {
		tails := tc.tails
		b.Run(fmt.Sprintf("tails=%d/rate=%d", tc.tails, tc.rate), func(b *testing.B) {
			st := memory.New(memory.Config{MaxSpans: 10_000_000}, 0)
			srv := newUIAPI(b, st, query.Config{}).URL
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			counts := make(chan int, tails)
			for range tails {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv+"/api/changes?follow=1&since=1s", nil)
				require.NoError(b, err)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(b, err)
				b.Cleanup(func() { _ = resp.Body.Close() })
				ready := make(chan struct{})
				go func(body io.ReadCloser) {
					defer body.Close()
					sc := bufio.NewScanner(body)
					n := 0
					for sc.Scan() {
						line := sc.Text()
						if strings.HasPrefix(line, ": backlog") {
							close(ready)
						}
						if strings.HasPrefix(line, "event: error") {
							counts <- -1
							return
						}
						if strings.HasPrefix(line, "data: ") {
							if n++; n == b.N {
								counts <- n
								return
							}
						}
					}
					counts <- n
				}(resp.Body)
				<-ready
			}
			obj := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "pods", Namespace: "ns", Name: "p"}
			now := time.Now().UTC()
			b.ResetTimer()
			start := time.Now()
			batch := make([]*aggregator.Span, 0, 100)
			interval := time.Second * time.Duration(cap(batch)) / time.Duration(tc.rate)
			next := start
			for i := range b.N {
				var sid trace.SpanID
				copy(sid[:], fmt.Sprintf("%08d", i))
				batch = append(batch, &aggregator.Span{TraceID: trace.TraceID{1}, SpanID: sid, Kind: aggregator.KindEvent, Source: "audit",
					Name: "kwok-controller patch", Object: obj, Window: now.Truncate(time.Hour), Start: now, End: now,
					Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "patch"}, {Key: aggregator.AttrUser, Value: "kwok-controller"},
						{Key: aggregator.AttrStatusCode, Value: "200"}, {Key: aggregator.AttrAuditID, Value: strconv.Itoa(i)}}})
				if len(batch) == cap(batch) || i == b.N-1 {
					time.Sleep(time.Until(next))
					next = next.Add(interval)
					require.NoError(b, st.Export(ctx, batch))
					batch = batch[:0]
				}
			}
			written := time.Now()
			for range tails {
				if n := <-counts; n != b.N {
					b.Fatalf("a tail took %d of %d changes (-1: cut off)", n, b.N)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
			b.ReportMetric(float64(time.Since(written).Microseconds())/1000, "lag-ms")
		})
	}
}
