package kelemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/healthz"
	apiquery "github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func localConfig(dataDir string) kelemetry.Config {
	cfg := kelemetry.Config{Cluster: "demo", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DataDir: dataDir}
	if dataDir != "" {
		// The fixtures were recorded on 2026-11-29: with the default maxAge of 7 days the
		// store's retention deletes their windows when it starts (from 2026-12-06 17:30 UTC on).
		cfg.Store.MaxAge = fixtureMaxAge
	}
	return cfg
}

// fixtureMaxAge keeps the fixtures' windows in the tests' embedded stores.
const fixtureMaxAge = 100 * 365 * 24 * time.Hour

// postRollout posts the recorded rollout's webhook batches.
func postRollout(t *testing.T, auditAddr string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	for line := range bytes.Lines(data) {
		resp, err := http.Post("http://"+auditAddr+"/audit/demo", "application/json", bytes.NewReader(line))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// readHealth reads GET /healthz of the app at apiAddr; ok is false unless it answered 200 with
// a Health.
func readHealth(t *testing.T, apiAddr string) (h healthz.Body, ok bool) {
	t.Helper()
	code, body := get(t, "http://"+apiAddr+"/healthz")
	return h, code == http.StatusOK && json.Unmarshal([]byte(body), &h) == nil
}

// waitCaughtUp waits until the app at apiAddr has handled every audit event it accepted and
// finished every link job (GET /healthz: queueDepth and linkJobs 0, replays done).
func waitCaughtUp(t *testing.T, apiAddr string) {
	t.Helper()
	require.Eventually(t, func() bool {
		h, ok := readHealth(t, apiAddr)
		return ok && h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
	}, 20*time.Second, 20*time.Millisecond)
}

// demoTraceFound asks the Jaeger API for the rollout's Deployment with its related objects.
func demoTraceFound(t *testing.T, apiAddr string) bool {
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`}, "start": {"0"}}
	code, body := get(t, "http://"+apiAddr+"/api/traces?"+q.Encode())
	if code != http.StatusOK {
		return false
	}
	var resp struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	return len(resp.Data) == 1 && len(resp.Data[0].Spans) > 1
}

// A user's own MeterProvider next to kelemetry.Module: supplied, not replaced, and every part
// counts into it; /metrics is not served then.
func TestModuleWithOwnMeterProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var servers *httpserver.Servers
	app := fxtest.New(t,
		kelemetry.Module,
		fx.Supply(localConfig(""), quietLogger(), fx.Annotate(mp, fx.As(new(metric.MeterProvider)))),
		fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()

	postRollout(t, servers.AuditAddr())
	waitCaughtUp(t, servers.APIAddr())
	require.True(t, demoTraceFound(t, servers.APIAddr()))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	for _, want := range []string{"kelemetry.aggregator.events", "kelemetry.audit.queue.accepted", "kelemetry.audit.consumer.events"} {
		assert.True(t, names[want], "%s counted into the supplied provider (have %v)", want, names)
	}
	code, _ := get(t, "http://"+servers.APIAddr()+"/metrics")
	assert.Equal(t, http.StatusNotFound, code, "the supplied provider is the user's to export")
}

// A part's configuration replaced with fx.Replace next to the bundle.
func TestModuleReplaceConfig(t *testing.T) {
	var engine *aggregator.Engine
	var w aggregator.Window
	app := fxtest.New(t,
		kelemetry.Module,
		fx.Supply(localConfig(""), quietLogger()),
		fx.Replace(aggregator.Config{LinkWorkers: 1}, aggregator.Window(10*time.Minute)),
		fx.Populate(&engine, &w), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()
	assert.Equal(t, aggregator.Window(10*time.Minute), w)
	assert.Equal(t, 1, engine.Config().LinkWorkers)
}

// A query-only binary: the store and the frontend over an embedded store that an all-in-one
// wrote earlier; no webhook port is opened.
func TestQueryOnlyComposition(t *testing.T) {
	dir := t.TempDir()
	var servers *httpserver.Servers
	ingest := fxtest.New(t, kelemetry.Module, fx.Supply(localConfig(dir), quietLogger()), fx.Populate(&servers), fx.NopLogger)
	ingest.RequireStart()
	postRollout(t, servers.AuditAddr())
	require.Eventually(t, func() bool { return demoTraceFound(t, servers.APIAddr()) }, 10*time.Second, 20*time.Millisecond)
	ingest.RequireStop()

	var query *httpserver.Servers
	app := fxtest.New(t,
		telemetry.Module, httpserver.Module, store.Module, frontend.Module,
		fx.Supply(quietLogger(), httpserver.Config{APIAddr: "127.0.0.1:0"}, store.Config{Embedded: pebble.Config{Dir: dir, MaxAge: fixtureMaxAge}}),
		fx.Populate(&query), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()
	assert.Empty(t, query.AuditAddr(), "no webhook in a query-only binary")
	assert.True(t, demoTraceFound(t, query.APIAddr()))
	code, body := get(t, "http://"+query.APIAddr()+"/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.Contains(body, "kelemetry_store_size_bytes"), "telemetry.Module serves the store's metrics")
}

// A store of the user's own replaces the built-in one inside the bundle: the aggregator writes
// into it, the query API reads from it, and the embedded store is never opened.
func TestModuleReplaceStore(t *testing.T) {
	mine := memory.New(memory.Config{}, 0)
	dir := filepath.Join(t.TempDir(), "never-opened")
	var servers *httpserver.Servers
	app := fxtest.New(t,
		kelemetry.Module,
		fx.Supply(localConfig(dir), quietLogger()),
		fx.Replace(fx.Annotate(mine, fx.As(new(store.Store)))),
		fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()

	postRollout(t, servers.AuditAddr())
	require.Eventually(t, func() bool { return demoTraceFound(t, servers.APIAddr()) }, 10*time.Second, 20*time.Millisecond)
	assert.Positive(t, mine.Stats().Spans, "the aggregator wrote into the replacement")
	// The data folder holds the durable audit queue (issue 12), and nothing of the store.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"audit-queue"}, names, "the embedded store was not opened")
}

// One window length for every part: with Config.Window = 10m the aggregator cuts the rollout into
// 10-minute traces (17:00 and 17:10), and the store and the query side find them by that length.
func TestModuleOneWindow(t *testing.T) {
	cfg := localConfig("")
	cfg.Window = 10 * time.Minute
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()
	postRollout(t, servers.AuditAddr())
	// The node's spans are stored independently of the Deployment's tree: wait for all of them.
	waitCaughtUp(t, servers.APIAddr())
	require.True(t, demoTraceFound(t, servers.APIAddr()))

	// The Deployment lives from 17:09:30 to 17:09:52: one window of 10 minutes, at 17:00.
	assert.Equal(t, []time.Time{time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)},
		objectWindows(t, servers.APIAddr(), "deployments", "demo"))

	// A node patched at 17:09 and at 17:10 has two 10-minute windows (it would have one of 30m).
	assert.Equal(t, []time.Time{time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 17, 10, 0, 0, time.UTC)},
		objectWindows(t, servers.APIAddr(), "nodes", "kwok-node-1"))
}

// objectWindows returns the start of every window /api/objects lists for one object, or nil
// while the object is not stored.
func objectWindows(t *testing.T, apiAddr, resource, name string) []time.Time {
	t.Helper()
	q := url.Values{"resource": {resource}, "name": {name}}
	code, body := get(t, "http://"+apiAddr+"/api/objects?"+q.Encode())
	require.Equal(t, http.StatusOK, code, body)
	var objs struct {
		Objects []apiquery.ObjectResult `json:"objects"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &objs))
	require.LessOrEqual(t, len(objs.Objects), 1, body)
	if len(objs.Objects) == 0 {
		return nil
	}
	var starts []time.Time
	for _, w := range objs.Objects[0].Windows {
		starts = append(starts, w.Start.UTC())
	}
	return starts
}

// /healthz counts the link jobs queued or running (here held by a user's linker that waits), and
// reports 0 once they are done: with queueDepth 0, the tracer has caught up.
func TestHealthCountsLinkJobs(t *testing.T) {
	release := make(chan struct{})
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module,
		fx.Supply(localConfig(""), quietLogger()),
		fx.Provide(aggregator.AsLinker(func() aggregator.Linker {
			return aggregator.NewLinker("waits", func(ctx context.Context, _ aggregator.Object) ([]aggregator.Link, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil, nil
			})
		})),
		fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()
	health := func() healthz.Body {
		h, ok := readHealth(t, servers.APIAddr())
		require.True(t, ok, "GET /healthz")
		return h
	}

	postRollout(t, servers.AuditAddr())
	require.Eventually(t, func() bool { return health().QueueDepth == 0 }, 10*time.Second, 20*time.Millisecond)
	assert.Positive(t, health().LinkJobs, "the held lookups")
	close(release)
	require.Eventually(t, func() bool { h := health(); return h.QueueDepth == 0 && h.LinkJobs == 0 }, 10*time.Second, 20*time.Millisecond)
}
