package query_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// rejectedByReason sums kelemetry.frontend.queries.rejected by its reason attribute.
func rejectedByReason(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return telemetrytest.Int64By(t, r, "kelemetry.frontend.queries.rejected", "reason")
}

// While running queries hold the memory budget, every heavy request of the Jaeger, UI and
// native APIs waits QueueWait and is refused with 503 and Retry-After, although turns are free;
// cheap requests are not held back. Once the memory is given back, the same requests run.
func TestHeavyRequestsWaitForMemory(t *testing.T) {
	metrics := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	const budget = 64 << 20
	e := query.NewEngine(rollout(t), 0, query.Config{MaxMemoryBytes: budget, QueueWait: 50 * time.Millisecond})
	require.Equal(t, int64(budget), e.MemoryBudget())
	srv := serveEngine(t, e, telemetry.Settings{MeterProvider: mp})

	// A running query that read 52 MiB (and keeps 4 MiB to draw them): less than an estimate
	// (16 MiB) is left.
	ctx, release, err := e.Admit(context.Background())
	require.NoError(t, err)
	require.True(t, e.Charge(ctx, 52<<20), "alone, a query grows past its share")

	from, to := strconv.FormatInt(rolloutFrom.UnixMicro(), 10), strconv.FormatInt(rolloutTo.UnixMicro(), 10)
	search := "/api/traces?service=tracing&tags=resource%3Ddeployments&start=" + from + "&end=" + to
	heavy := []string{
		search,
		"/api/traces/0123456789abcdef0123456789abcdef",
		"/api/ui/search?service=tracing&start=" + from + "&end=" + to,
		"/api/ui/suggestions?start=" + from,
		"/api/critical-path/0123456789abcdef0123456789abcdef",
		"/api/objects?resource=deployments",
		"/api/stored-traces/1",
		"/api/objects/history?resource=deployments&name=demo&namespace=default&cluster=test&group=apps",
	}
	for _, path := range heavy {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), path)
		assert.Contains(t, string(body), "the query memory budget is in use (56 MiB held of 64 MiB): try again later", path)
	}
	for _, path := range []string{"/api/services", "/api/services/tracing/operations"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "cheap requests are not held back: %s", path)
	}
	assert.Equal(t, map[string]int64{"memory": int64(len(heavy))}, rejectedByReason(t, metrics))

	release()
	code, body := fetch(t, srv.URL+search)
	assert.Equal(t, http.StatusOK, code, "%s", body)
	assert.Contains(t, string(body), `"traceID"`)
}

// serveEngine serves the Jaeger, UI (with the critical path) and native APIs over e.
func serveEngine(t *testing.T, e *query.Engine, tel telemetry.Settings) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	query.NewJaegerAPI(e, tel).Register(mux)
	query.NewUIAPI(e, tel).Register(mux)
	query.NewNativeAPI(e.Reader(), tel).ShareLimits(e).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// A query that needs more memory than the budget has stops reading and answers what it read,
// marked truncated; with the budget off, the same query is whole.
func TestMemoryBudgetTruncatesSearch(t *testing.T) {
	st := wideWorld(t, 2000)
	q := strings.Replace(fullTreeQuery, "start=0", "start="+strconv.FormatInt(w0.UnixMicro(), 10)+"&end="+strconv.FormatInt(w0.Add(time.Hour).UnixMicro(), 10), 1) + "&tags=resource%3Ddeployments"
	cfg := query.Config{PerLevel: 5000, Total: 5000}

	cfg.MaxMemoryBytes = -1
	resp, env, _ := getTrunc(t, serveAll(t, st, cfg, telemetry.Settings{}).URL+q)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, env.Truncated, "no memory budget")
	require.Len(t, env.Data, 1)
	whole := env.Data[0]

	cfg.MaxMemoryBytes = 4 << 20
	const msg = "result truncated: memory budget of 4 MiB reached (shared by the queries running at once); narrow the time range or try again later"
	resp, env, _ = getTrunc(t, serveAll(t, st, cfg, telemetry.Settings{}).URL+q)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a truncated result is still a result")
	assert.Equal(t, msg, env.Truncated)
	assert.Equal(t, msg, resp.Header.Get("X-Kelemetry-Truncated"))
	require.Len(t, env.Data, 1)
	tr := env.Data[0]
	assert.Contains(t, tr.Warnings, msg)
	events := func(tr query.JaegerTrace) int {
		n := 0
		for _, s := range tr.Spans {
			for _, tag := range s.Tags {
				if tag.Key == "kelemetry.span.kind" && tag.Value == "event" {
					n++
				}
			}
		}
		return n
	}
	assert.Less(t, events(tr), events(whole), "fewer events read")
	assert.Positive(t, events(tr), "what fit is shown")
	assert.Len(t, tr.Spans, len(whole.Spans)-events(whole)+events(tr)+1, "every object named, and a marker span")
}

// A large tree is drawn in parallel (its objects' events folded, its spans encoded, on every
// core): the answer is byte for byte the one drawn on one core.
func TestLargeTreeDrawnInParallelAsOnOneCore(t *testing.T) {
	st := wideWorld(t, 1500)
	q := strings.Replace(fullTreeQuery, "start=0", "start="+strconv.FormatInt(w0.UnixMicro(), 10)+"&end="+strconv.FormatInt(w0.Add(time.Hour).UnixMicro(), 10), 1) + "&tags=resource%3Ddeployments"
	srv := serveAll(t, st, query.Config{PerLevel: 5000, Total: 5000, MaxMemoryBytes: -1}, telemetry.Settings{})
	get := func(procs int) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		resp, err := http.Get(srv.URL + q)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}
	one := get(1)
	require.Contains(t, one, "web-1-1499", "the whole tree")
	assert.Equal(t, one, get(4))
}
