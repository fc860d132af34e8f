package jaeger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/jaegertest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestJaeger(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openJaegerTest(t, jaegertest.New(t), nil) }, jaegerLimits)
}

func TestJaegerSearch(t *testing.T) {
	storetest.RunSearch(t, func(t *testing.T) storetest.Store { return openJaegerTest(t, jaegertest.New(t), nil) }, jaegerLimits)
}

// Several replicas write the same object and link spans, and a repeated Kubernetes Event
// rewrites its span: reads keep one span per ID, the newest version.
func TestJaegerDuplicatesNewestWins(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	a, b := openJaegerTest(t, f, nil), openJaegerTest(t, f, nil)
	obj := ref("c", "", "pods", "ns", "p")
	ev := eventSpan(obj, t0, "e", time.Minute)
	later := *ev
	later.End = ev.End.Add(time.Minute)
	later.Attributes = aggregator.Attrs{{Key: "kelemetry.event.count", Value: "2"}}
	export(t, a, objectSpan(obj, t0), &later)
	export(t, b, objectSpan(obj, t0), ev) // an older version, written after the newer one

	got, err := a.GetTrace(ctx, ev.TraceID)
	require.NoError(t, err)
	require.Len(t, got, 2, "one object span, one event span")
	assert.Equal(t, later.End, got[1].End)
	assert.Equal(t, later.Attributes, got[1].Attributes)

	res, err := b.FindObjects(ctx, query.ObjectQuery{Resource: "pods"})
	require.NoError(t, err)
	assert.Equal(t, []string{"c//pods/ns/p:1"}, keys(res))
}

// An object's windows over a short range are read by their computed trace IDs: no search.
func TestJaegerExactObjectNeedsNoSearch(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, nil)
	obj := ref("c", "apps", "deployments", "ns", "d")
	export(t, s, objectSpan(obj, t0), objectSpan(obj, t0.Add(2*win)))
	res, err := s.FindObjects(ctx, query.ObjectQuery{Cluster: "c", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d",
		Exact: true, From: t0, To: t0.Add(3 * win)})
	require.NoError(t, err)
	assert.Equal(t, []string{"c/apps/deployments/ns/d:2"}, keys(res))
	assert.Zero(t, f.Calls("FindTraceIDs"))

	// A long range searches instead, with the same answer.
	res, err = s.FindObjects(ctx, query.ObjectQuery{Cluster: "c", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d",
		Exact: true, From: t0, To: t0.Add(100 * win)})
	require.NoError(t, err)
	assert.Equal(t, []string{"c/apps/deployments/ns/d:2"}, keys(res))
	assert.Equal(t, 1, f.Calls("FindTraceIDs"))
}

// Reads of windows long closed are cached; the cache is bounded in bytes.
func TestJaegerCache(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, func(c *Config) { c.CacheBytes = 4 << 10 })
	var ws []query.ObjectWindow
	for i := range 20 {
		obj := ref("c", "", "pods", "ns", string(rune('a'+i)))
		export(t, s, objectSpan(obj, t0), eventSpan(obj, t0, "e", time.Minute))
		ws = append(ws, query.ObjectWindow{Window: t0, TraceID: aggregator.TraceIDFor(obj.Key(), t0)})
	}
	_, err := s.GetTraces(ctx, ws[:1])
	require.NoError(t, err)
	calls := f.Calls("GetTraces")
	_, err = s.GetTraces(ctx, ws[:1])
	require.NoError(t, err)
	assert.Equal(t, calls, f.Calls("GetTraces"), "served from the cache")

	got, err := s.GetTraces(ctx, ws)
	require.NoError(t, err)
	for i := range got {
		assert.Len(t, got[i], 2)
	}
	_, bytes, evicted := s.cache.stats()
	assert.LessOrEqual(t, bytes, int64(4<<10))
	assert.Positive(t, evicted)
}

// With the backend down, reads fail fast with query.ErrUnavailable and recover once it is back.
func TestJaegerBackendDown(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, func(c *Config) { c.CacheTTL = time.Nanosecond })
	obj := ref("c", "", "pods", "ns", "p")
	export(t, s, objectSpan(obj, time.Now().Truncate(win)))
	f.Stop()

	start := time.Now()
	_, err := s.FindObjects(ctx, query.ObjectQuery{Resource: "pods"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, query.ErrUnavailable), "got %v", err)
	assert.Contains(t, err.Error(), f.Addr())
	_, err = s.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), time.Now().Truncate(win)))
	assert.True(t, errors.Is(err, query.ErrUnavailable), "got %v", err)
	_, err = s.Clusters(ctx)
	assert.True(t, errors.Is(err, query.ErrUnavailable), "got %v", err)
	assert.Less(t, time.Since(start), 10*time.Second, "no hang")

	f.Start(t, f.Addr())
	require.Eventually(t, func() bool {
		res, err := s.FindObjects(ctx, query.ObjectQuery{Resource: "pods"})
		return err == nil && len(res) == 1
	}, 10*time.Second, 50*time.Millisecond)
}

func TestJaegerReadOnly(t *testing.T) {
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, func(c *Config) { c.OTLP.Endpoint = "" })
	err := s.Store.Export(context.Background(), []*aggregator.Span{objectSpan(ref("c", "", "pods", "", "p"), t0)})
	assert.ErrorContains(t, err, "read-only")
}

func TestJaegerConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "endpoint"},
		{Config{Endpoint: "nohost"}, "host:port"},
		{Config{Endpoint: "h:1", SearchDepth: -1}, "searchDepth"},
		{Config{Endpoint: "h:1", OTLP: otlpConfig("ftp://x")}, "jaeger.otlp"},
	} {
		assert.ErrorContains(t, tc.cfg.Validate(), tc.want)
	}
	assert.NoError(t, Config{Endpoint: "grpcs://h:1"}.Validate())
}

// FindExact reads the windows of many objects in a few calls, and answers like FindObjects.
func TestJaegerFindExact(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, nil)
	var keys []aggregator.ObjectKey
	for i := range 100 {
		obj := ref("c", "", "pods", "ns", fmt.Sprintf("p%d", i))
		keys = append(keys, obj.Key())
		if i%2 == 0 {
			export(t, s, objectSpan(obj, t0), objectSpan(obj, t0.Add(2*win)))
		}
	}
	before := f.Calls("GetTraces")
	got, err := s.FindExact(ctx, keys, t0, t0.Add(3*win))
	require.NoError(t, err)
	require.Len(t, got, 100)
	assert.LessOrEqual(t, f.Calls("GetTraces")-before, 400/64+1, "batched")
	assert.Zero(t, f.Calls("FindTraceIDs"))
	for i, k := range keys {
		want, err := s.FindObjects(ctx, query.Exact(k, t0, t0.Add(3*win)))
		require.NoError(t, err)
		if i%2 == 1 {
			assert.Empty(t, want)
			assert.Empty(t, got[i].Windows, i)
			continue
		}
		require.Len(t, want, 1)
		assert.Equal(t, want[0], got[i], i)
		assert.Len(t, got[i].Windows, 2)
	}
	long, err := s.FindExact(ctx, keys[:3], t0, t0.Add(100*win))
	require.NoError(t, err)
	assert.Equal(t, got[:3], long)
}

// The jaeger backend is an aggregator.Syncer: Sync returns once the spans exported before it are
// at the collector (the NATS audit queue acknowledges its messages after it), without waiting
// for the OTLP flush interval; a read-only backend has nothing to sync.
func TestJaegerSync(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	s := openJaegerTest(t, f, func(c *Config) { c.OTLP.FlushInterval = time.Hour })
	y, ok := any(s.Store).(aggregator.Syncer)
	require.True(t, ok, "jaeger.Store implements aggregator.Syncer")
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, s.Store.Export(ctx, []*aggregator.Span{objectSpan(obj, t0), eventSpan(obj, t0, "e", time.Minute)}))
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, y.Sync(sctx))
	assert.Equal(t, 3, f.Spans(), "two spans and the cluster marker are at the collector")

	ro := openJaegerTest(t, f, func(c *Config) { c.OTLP = otlpsink.Config{} })
	require.NoError(t, any(ro.Store).(aggregator.Syncer).Sync(ctx))
}

// HasSpans says which spans Jaeger holds, past the read cache: another replica's write of a
// moment ago counts although this replica cached the trace before it.
func TestJaegerHasSpans(t *testing.T) {
	ctx := context.Background()
	f := jaegertest.New(t)
	a, b := openJaegerTest(t, f, nil), openJaegerTest(t, f, func(c *Config) { c.CacheTTL = time.Hour })
	obj := ref("c", "", "pods", "ns", "p")
	other := ref("c", "", "pods", "ns", "q")
	first, second := eventSpan(obj, t0, "e1", time.Minute), eventSpan(obj, t0, "e2", 2*time.Minute)
	export(t, a, objectSpan(obj, t0), first)
	_, err := b.GetTrace(ctx, first.TraceID) // cached by b without the second event
	require.NoError(t, err)
	export(t, a, second)
	refOf := func(sp *aggregator.Span) aggregator.SpanRef {
		return aggregator.SpanRef{TraceID: sp.TraceID, SpanID: sp.SpanID, Window: sp.Window}
	}
	missing := eventSpan(obj, t0, "e3", 3*time.Minute)
	elsewhere := eventSpan(other, t0, "e1", time.Minute)
	inOtherWindow := eventSpan(obj, t0.Add(win), "e1", time.Minute)
	has, err := b.HasSpans(ctx, []aggregator.SpanRef{refOf(first), refOf(second), refOf(missing), refOf(elsewhere), refOf(inOtherWindow), refOf(first)})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, false, false, false, true}, has)
	cached, err := b.GetTrace(ctx, first.TraceID)
	require.NoError(t, err)
	assert.Len(t, cached, 2, "the read cache is not what HasSpans answers from")

	f.Stop()
	_, err = b.HasSpans(ctx, []aggregator.SpanRef{refOf(first)})
	assert.True(t, errors.Is(err, query.ErrUnavailable), "got %v", err)
}

// The store's counters are exported at 0 from the start, each method and result included.
func TestCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	f := jaegertest.New(t)
	j, err := Open(context.Background(), Config{Endpoint: f.Addr(), Timeout: 2 * time.Second}, aggregator.Window(win),
		telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Stop(context.Background()) })
	reads := map[string]int64{}
	for _, method := range []string{"FindTraceIDs", "GetTraces", "GetServices", "GetOperations"} {
		for _, result := range []string{"ok", "unavailable", "canceled", "error"} {
			reads["method="+method+",result="+result] = 0
		}
	}
	assert.Equal(t, reads, telemetrytest.Points(t, reader, "kelemetry.store.jaeger.reads"))
	for _, name := range []string{"kelemetry.store.jaeger.cluster_markers", "kelemetry.store.jaeger.duplicate_spans", "kelemetry.store.jaeger.search_truncated"} {
		assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, name), name)
	}
}

// TestJaegerChangeFeed: the feed through a search of the audit spans equals the recorded logs'
// write events (storetest.RunChanges).
func TestJaegerChangeFeed(t *testing.T) {
	storetest.RunChanges(t, "../..", func(t *testing.T) storetest.ChangeStore { return openJaegerTest(t, jaegertest.New(t), nil) }, "rollout", "cronjob")
}
