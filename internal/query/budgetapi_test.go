package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// serveAll serves the Jaeger, UI and native APIs over one engine with cfg.
func serveAll(t testing.TB, r store.Reader, cfg query.Config, tel telemetry.Settings) *httptest.Server {
	t.Helper()
	e := query.NewEngine(r, 0, cfg)
	mux := http.NewServeMux()
	query.NewJaegerAPI(e, tel).Register(mux)
	query.NewUIAPI(e, tel).Register(mux)
	query.NewNativeAPI(r, tel).ShareLimits(e).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The request: every pod of a Deployment as one tree.
const fullTreeQuery = "/api/traces?service=tree%20%5Bfull%20tree%5D&start=0&limit=1000"

type truncEnvelope struct {
	Data      []query.JaegerTrace `json:"data"`
	Errors    []query.JaegerError `json:"errors"`
	Truncated string              `json:"truncated"`
}

// answer is a fetched response: status, headers, the envelope and the body's size.
type answer struct {
	StatusCode int
	Header     http.Header
}

func getTrunc(t *testing.T, u string) (answer, truncEnvelope, int) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	var env truncEnvelope
	var raw json.RawMessage
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&raw))
	require.NoError(t, json.Unmarshal(raw, &env), string(raw))
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, env, len(raw)
}

func TestJaegerAPISpanBudget(t *testing.T) {
	srv := serveAll(t, wideWorld(t, 200), query.Config{PerLevel: 1000, Total: 1000, MaxSpans: 300}, telemetry.Settings{})
	const msg = "result truncated: span budget of 300 reached; narrow the time range"
	resp, env, _ := getTrunc(t, srv.URL+strings.Replace(fullTreeQuery, "start=0", "start="+strconv.FormatInt(w0.UnixMicro(), 10)+"&end="+strconv.FormatInt(w0.Add(time.Hour).UnixMicro(), 10), 1)+"&tags=resource%3Ddeployments")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a truncated result is still a result")
	assert.Equal(t, msg, resp.Header.Get("X-Kelemetry-Truncated"))
	assert.Equal(t, msg, env.Truncated)
	require.Len(t, env.Errors, 1, "stock Jaeger UI shows the errors of an answer")
	assert.Equal(t, msg, env.Errors[0].Msg)
	require.Equal(t, 1, len(env.Data))
	tr := env.Data[0]
	assert.Contains(t, tr.Warnings, msg)
	assert.Contains(t, tr.Spans[0].Warnings, msg, "the root span carries the warning")
	marker := tr.Spans[len(tr.Spans)-1]
	assert.Equal(t, msg, marker.OperationName, "a span names the truncation in the timeline")
	assert.Equal(t, tr.Spans[0].SpanID, marker.References[0].SpanID)

	// The trace page's request says so too.
	resp, env, _ = getTrunc(t, srv.URL+"/api/traces/"+tr.TraceID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, msg, env.Truncated)
	require.Len(t, env.Data, 1)
	assert.Contains(t, env.Data[0].Warnings, msg)
}

func TestJaegerAPIRenderBudget(t *testing.T) {
	st := wideWorld(t, 200)
	resp, env, full := getTrunc(t, serveAll(t, st, query.Config{PerLevel: 1000, Total: 1000}, telemetry.Settings{}).URL+fullTreeQuery)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, env.Errors)
	require.Empty(t, env.Truncated)
	require.Greater(t, full, 256<<10, "the untruncated answer is large")

	const budget = 64 << 10
	srv := serveAll(t, st, query.Config{PerLevel: 1000, Total: 1000, MaxRenderBytes: budget}, telemetry.Settings{})
	const msg = "result truncated: render budget of 65536 bytes reached; narrow the time range"
	resp, env, size := getTrunc(t, srv.URL+fullTreeQuery)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.LessOrEqual(t, size, budget+4<<10, "the budget bounds the answer (plus the envelope and the marker)")
	assert.Equal(t, msg, env.Truncated)
	require.Equal(t, 1, len(env.Data))
	tr := env.Data[0]
	assert.Contains(t, tr.Warnings, msg)
	assert.Equal(t, msg, tr.Spans[len(tr.Spans)-1].OperationName)
	ids := map[string]bool{}
	for _, s := range tr.Spans {
		ids[s.SpanID] = true
	}
	for _, s := range tr.Spans {
		for _, r := range s.References {
			assert.True(t, ids[r.SpanID], "every parent of a drawn span is drawn")
		}
	}

	// The native API's stored traces: the ReplicaSet's window holds 201 link spans.
	rsTrace := aggregator.TraceIDFor(obj("replicasets", "web-1").Key(), w0)
	srv = serveAll(t, st, query.Config{MaxRenderBytes: 4096}, telemetry.Settings{})
	resp, env, size = getTrunc(t, srv.URL+"/api/stored-traces/"+rsTrace.String())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "result truncated: render budget of 4096 bytes reached; narrow the time range", env.Truncated)
	assert.LessOrEqual(t, size, 4096+2048)
	srv = serveAll(t, st, query.Config{MaxSpans: 10}, telemetry.Settings{})
	_, env, _ = getTrunc(t, srv.URL+"/api/stored-traces/"+rsTrace.String())
	assert.Equal(t, "result truncated: span budget of 10 reached; narrow the time range", env.Truncated)
	require.Len(t, env.Data, 1)
	assert.Len(t, env.Data[0].Spans, 10)
}

func TestUIAPITruncation(t *testing.T) {
	srv := serveAll(t, wideWorld(t, 200), query.Config{PerLevel: 1000, Total: 1000, MaxSpans: 300}, telemetry.Settings{})
	const msg = "result truncated: span budget of 300 reached; narrow the time range"
	resp, err := http.Get(srv.URL + "/api/ui/search?service=tracing%20%5Bfull%20tree%5D&start=0&tags=resource%3Ddeployments")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Data      []query.SearchSummary `json:"data"`
		Truncated string                `json:"truncated"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, msg, body.Truncated, "the UI shows it as a banner")
	require.Len(t, body.Data, 1)
	assert.Equal(t, msg, body.Data[0].Truncated)
}

// blockingReader holds GetTraces until released, and says when one is held.
type blockingReader struct {
	store.Reader
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (r *blockingReader) GetTraces(ctx context.Context, ws []store.ObjectWindow) ([][]*aggregator.Span, error) {
	r.once.Do(func() { close(r.held) })
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.Reader.GetTraces(ctx, ws)
}

func TestConcurrentHeavyQueriesLimited(t *testing.T) {
	metrics := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	r := &blockingReader{Reader: wideWorld(t, 2), held: make(chan struct{}), release: make(chan struct{})}
	srv := serveAll(t, r, query.Config{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond}, telemetry.Settings{MeterProvider: mp})

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + fullTreeQuery)
		if err != nil {
			first <- 0
			return
		}
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-r.held

	for _, path := range []string{fullTreeQuery, "/api/ui/search?start=0", "/api/objects", "/api/stored-traces/1"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		assert.Equal(t, "1", resp.Header.Get("Retry-After"), path)
	}
	for _, path := range []string{"/api/services", "/api/services/tracing/operations"} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "cheap requests are not limited: %s", path)
	}

	close(r.release)
	assert.Equal(t, http.StatusOK, <-first)

	var rm metricdata.ResourceMetrics
	require.NoError(t, metrics.Collect(context.Background(), &rm))
	var rejected int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "kelemetry.frontend.queries.rejected" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					rejected += dp.Value
				}
			}
		}
	}
	assert.Equal(t, int64(4), rejected)
}

func TestQueryBoundsClamped(t *testing.T) {
	srv := serveAll(t, rollout(t), query.Config{}, telemetry.Settings{})
	from := strconv.FormatInt(rolloutFrom.UnixMicro(), 10)
	to := strconv.FormatInt(rolloutTo.UnixMicro(), 10)
	found := func(t *testing.T, path string) {
		t.Helper()
		code, body := fetch(t, srv.URL+path)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &env))
		assert.NotContains(t, []string{"null", "[]"}, string(env.Data), "%s finds the rollout", path)
	}
	for _, api := range []string{"/api/traces", "/api/ui/search"} {
		t.Run(strings.TrimPrefix(api, "/api/"), func(t *testing.T) {
			q := "?service=tracing&tags=name%3Ddemo&"
			found(t, api+q+"start="+from+"&end=9999999999999999999")    // past int64
			found(t, api+q+"start="+from+"&end=9223372036854775")       // past 2262
			found(t, api+q+"start=-1&end="+to)                          // before 1970
			found(t, api+q+"start=-99999999999999999999&end="+to)       // before int64
			found(t, api+q+"end="+to+"&lookback=99999999999999999999d") // overflowing days
			found(t, api+q+"end="+to+"&lookback=999999999w")
			for _, p := range []string{"minDuration=-1s", "maxDuration=-5m", "start=abc", "end=1e3", "lookback=-3d"} {
				expectError(t, srv.URL+api+q+p, http.StatusBadRequest, strings.SplitN(p, "=", 2)[0])
			}
		})
	}
	t.Run("suggestions", func(t *testing.T) {
		found(t, "/api/ui/suggestions?start=-1&end=9999999999999999999")
	})
	t.Run("objects", func(t *testing.T) {
		code, body := fetch(t, srv.URL+"/api/objects?name=demo&from=-1&to=9999999999999999999")
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, string(body), `"name":"demo"`)
		code, body = fetch(t, srv.URL+"/api/objects?name=demo&from="+url.QueryEscape("0001-01-01T00:00:00Z")+"&to="+url.QueryEscape("9999-12-31T23:59:59Z"))
		require.Equal(t, http.StatusOK, code, string(body))
		assert.Contains(t, string(body), `"name":"demo"`)
	})
	t.Run("redirect", func(t *testing.T) {
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, ts := range []string{"9999999999999999999", "-1", "9999-12-31T23:59:59Z"} {
			resp, err := client.Get(srv.URL + "/redirect?resource=deployments&name=demo&time=" + url.QueryEscape(ts))
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusNotFound, resp.StatusCode, "nothing stored then, and no overflow: %s", ts)
		}
	})
}

func TestNothingReadInTimeIs503(t *testing.T) {
	srv := serveAll(t, &slowReader{Reader: wideWorld(t, 2)}, query.Config{Timeout: 50 * time.Millisecond}, telemetry.Settings{})
	for _, path := range []string{fullTreeQuery, "/api/ui/search?start=0"} {
		ans, env, _ := getTrunc(t, srv.URL+path)
		assert.Equal(t, http.StatusServiceUnavailable, ans.StatusCode, path)
		assert.NotEmpty(t, ans.Header.Get("Retry-After"), path)
		require.Len(t, env.Errors, 1, path)
		assert.Equal(t, "search: query budget exhausted: time budget of 50ms reached; narrow the time range", env.Errors[0].Msg, path)
	}
}

func TestLookupSharesRenderBudget(t *testing.T) {
	st := wideWorld(t, 50)
	srv := serveAll(t, st, query.Config{MaxRenderBytes: 2048}, telemetry.Settings{})
	var q []string
	for p := range 5 {
		q = append(q, "traceID="+aggregator.TraceIDFor(obj("pods", fmt.Sprintf("web-1-%04d", p)).Key(), w0).String())
	}
	ans, env, size := getTrunc(t, srv.URL+"/api/traces?"+strings.Join(q, "&"))
	require.Equal(t, http.StatusOK, ans.StatusCode)
	assert.Less(t, len(env.Data), 5, "the budget is the request's, not each trace's")
	assert.LessOrEqual(t, size, 2048+4096)
	assert.Contains(t, env.Truncated, "result truncated: render budget of 2048 bytes reached; narrow the time range")
}

// TestMergeSharesRenderBudget: the members of a merge share the request's render budget, and
// a member cut short makes the merged answer say it is truncated (envelope and header), like
// any other lookup.
func TestMergeSharesRenderBudget(t *testing.T) {
	st := wideWorld(t, 50)
	srv := serveAll(t, st, query.Config{MaxRenderBytes: 2048}, telemetry.Settings{})
	var ids []string
	for p := range 3 {
		ids = append(ids, aggregator.TraceIDFor(obj("pods", fmt.Sprintf("web-1-%04d", p)).Key(), w0).String())
	}
	ans, env, size := getTrunc(t, srv.URL+"/api/traces/"+strings.Join(ids, ""))
	require.Equal(t, http.StatusOK, ans.StatusCode)
	assert.LessOrEqual(t, size, 2048+4096)
	assert.Contains(t, env.Truncated, "result truncated: render budget of 2048 bytes reached; narrow the time range")
	assert.Contains(t, ans.Header.Get("X-Kelemetry-Truncated"), "render budget")
	require.Len(t, env.Data, 1)
	for _, s := range env.Data[0].Spans {
		assert.Equal(t, env.Data[0].TraceID, s.TraceID, "a member's span is written as merged, not as its member drew it")
	}
}

// TestObjectHistoryRenderBudget: an object's history is bounded like a drawn trace, by the
// render budget: past it the moments are the oldest that fit and the answer says it is
// truncated.
func TestObjectHistoryRenderBudget(t *testing.T) {
	q := "/api/objects/test/-/secrets/default/creds/history"
	var full, cut objectHistory
	require.Equal(t, http.StatusOK, getJSON(t, serveAll(t, secretStore(t), query.Config{}, telemetry.Settings{}).URL+q, &full))
	require.Len(t, full.Data.Moments, 3)
	assert.Empty(t, full.Data.Truncated)

	srv := serveAll(t, secretStore(t), query.Config{MaxRenderBytes: 250}, telemetry.Settings{})
	require.Equal(t, http.StatusOK, getJSON(t, srv.URL+q, &cut))
	require.NotEmpty(t, cut.Data.Moments, "the oldest moments that fit")
	assert.Less(t, len(cut.Data.Moments), 3)
	assert.Equal(t, full.Data.Moments[:len(cut.Data.Moments)], cut.Data.Moments)
	assert.Contains(t, cut.Data.Truncated, "render budget of 250 bytes reached")
}

// The APIs' query counters are exported at 0 from the start, by api and reason.
func TestQueryCountersStartAtZero(t *testing.T) {
	metrics := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	serveAll(t, rollout(t), query.Config{}, telemetry.Settings{MeterProvider: mp})
	rejected, truncated := map[string]int64{}, map[string]int64{}
	for _, api := range []string{"jaeger", "ui", "native"} {
		rejected["api="+api+",reason=concurrency"] = 0
		rejected["api="+api+",reason=memory"] = 0
		truncated["api="+api] = 0
	}
	assert.Equal(t, rejected, telemetrytest.Points(t, metrics, "kelemetry.frontend.queries.rejected"))
	assert.Equal(t, truncated, telemetrytest.Points(t, metrics, "kelemetry.frontend.queries.truncated"))
}
