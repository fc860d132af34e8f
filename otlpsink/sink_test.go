package otlpsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

var (
	window = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	quiet  = slog.New(slog.DiscardHandler)
)

// testSpans returns an object span, a link span and a failed event span with logs.
func testSpans() []*aggregator.Span {
	obj := aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "ns", Name: "web-1", UID: "u-1"}
	tid := aggregator.TraceIDFor(obj.Key(), window)
	root := aggregator.ObjectSpanID(tid)
	target := aggregator.ObjectRef{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "web"}
	return []*aggregator.Span{
		{
			TraceID: tid, SpanID: root, Kind: aggregator.KindObject, Source: "object", Name: "replicasets/web-1",
			Object: obj, Window: window, Start: window, End: window.Add(30 * time.Minute),
		},
		{
			TraceID: tid, SpanID: aggregator.LinkSpanID(tid, target.Key(), aggregator.RoleParent), ParentID: root,
			Kind: aggregator.KindLink, Source: "link", Name: "parent deployments/web", Object: obj, Window: window,
			Start: window, End: window.Add(30 * time.Minute),
			Link: &aggregator.Link{Target: target, Role: aggregator.RoleParent, Class: "children"},
		},
		{
			TraceID: tid, SpanID: aggregator.EventSpanID(tid, "audit", "id-1"), ParentID: root,
			Kind: aggregator.KindEvent, Source: "audit", Name: "update", Object: obj, Window: window,
			Start: window.Add(time.Minute + 123), End: window.Add(time.Minute + time.Second),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}, {Key: aggregator.AttrCluster, Value: "c1-alias"}},
			Logs: []aggregator.Log{
				{Time: window.Add(time.Minute + 500), Type: aggregator.LogTypeError, Message: "conflict", Attributes: aggregator.Attrs{{Key: "code", Value: "409"}}},
				{Type: "", Message: "no time"},
			},
			Error: true,
		},
	}
}

// manySpans returns n distinct event spans.
func manySpans(n int) []*aggregator.Span {
	base := testSpans()[2]
	out := make([]*aggregator.Span, n)
	for i := range out {
		sp := *base
		sp.SpanID = aggregator.EventSpanID(sp.TraceID, "audit", fmt.Sprint(i))
		out[i] = &sp
	}
	return out
}

// keepExporter is an InMemoryExporter whose spans survive Shutdown.
type keepExporter struct{ *tracetest.InMemoryExporter }

func (keepExporter) Shutdown(context.Context) error { return nil }

// recorder is a SpanExporter that records batch sizes and can fail or block.
type recorder struct {
	mu       sync.Mutex
	batches  []int
	ids      []trace.SpanID
	calls    int
	shutdown bool
	fail     func(call int) error            // nil: succeed
	block    func(ctx context.Context) error // nil: do not block
}

func (r *recorder) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if r.block != nil {
		if err := r.block(ctx); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		if err := r.fail(r.calls); err != nil {
			return err
		}
	}
	r.batches = append(r.batches, len(spans))
	for _, sp := range spans {
		r.ids = append(r.ids, sp.SpanContext().SpanID())
	}
	return nil
}

func (r *recorder) Shutdown(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdown = true
	return nil
}

func (r *recorder) state() (batches []int, calls int, shutdown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...), r.calls, r.shutdown
}

type metrics struct{ reader *sdkmetric.ManualReader }

func newMetrics() (metrics, *sdkmetric.MeterProvider) {
	r := sdkmetric.NewManualReader()
	return metrics{r}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
}

// value sums the data points of an int64 counter, restricted to reason if set.
func (m metrics) value(t *testing.T, name, reason string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			sum, ok := mt.Data.(metricdata.Sum[int64])
			require.True(t, ok, "metric %s has data %T", name, mt.Data)
			for _, p := range sum.DataPoints {
				if v, _ := p.Attributes.Value("reason"); reason == "" || v.AsString() == reason {
					total += p.Value
				}
			}
		}
	}
	return total
}

func newSink(t *testing.T, cfg Config, exp sdktrace.SpanExporter, mp *sdkmetric.MeterProvider) *Sink {
	t.Helper()
	var s *Sink
	var err error
	if mp == nil {
		s, err = NewWithExporter(cfg, exp, telemetry.Settings{Logger: quiet})
	} else {
		s, err = NewWithExporter(cfg, exp, telemetry.Settings{Logger: quiet, MeterProvider: mp})
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

func TestSpansKeepIDsTimesAndAttributes(t *testing.T) {
	ctx := context.Background()
	mem := keepExporter{tracetest.NewInMemoryExporter()}
	s := newSink(t, Config{}, mem, nil)
	require.NoError(t, s.Start(ctx))
	in := testSpans()
	require.NoError(t, s.Export(ctx, in))
	require.NoError(t, s.Stop(ctx))

	got := mem.GetSpans()
	require.Len(t, got, len(in))
	for i, want := range in {
		g := got[i]
		assert.Equal(t, want.TraceID, g.SpanContext.TraceID(), "span %d", i)
		assert.Equal(t, want.SpanID, g.SpanContext.SpanID(), "span %d", i)
		assert.True(t, g.SpanContext.IsSampled())
		assert.Equal(t, want.ParentID, g.Parent.SpanID(), "span %d", i)
		if want.ParentID.IsValid() {
			assert.Equal(t, want.TraceID, g.Parent.TraceID())
		}
		assert.True(t, want.Start.Equal(g.StartTime), "span %d start %s", i, g.StartTime)
		assert.True(t, want.End.Equal(g.EndTime), "span %d end %s", i, g.EndTime)
		assert.Equal(t, want.Name, g.Name)
		svc, ok := g.Resource.Set().Value(AttrServiceName)
		assert.True(t, ok)
		assert.Equal(t, want.Source, svc.AsString())
		assert.Equal(t, scopeName, g.InstrumentationScope.Name)
	}

	attrs := func(kvs []attribute.KeyValue) map[string]string {
		m := map[string]string{}
		for _, kv := range kvs {
			_, dup := m[string(kv.Key)]
			assert.False(t, dup, "duplicate key %s", kv.Key)
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	assert.Equal(t, map[string]string{
		AttrSpanKind: "object", aggregator.AttrCluster: "c1", aggregator.AttrGroup: "apps", aggregator.AttrVersion: "v1",
		aggregator.AttrResource: "replicasets", aggregator.AttrNamespace: "ns", aggregator.AttrName: "web-1", aggregator.AttrUID: "u-1",
	}, attrs(got[0].Attributes))
	link := attrs(got[1].Attributes)
	assert.Equal(t, "link", link[AttrSpanKind])
	assert.Equal(t, "c1", link[aggregator.AttrLinkCluster])
	assert.Equal(t, "apps", link[aggregator.AttrLinkGroup])
	assert.Equal(t, "deployments", link[aggregator.AttrLinkResource])
	assert.Equal(t, "ns", link[aggregator.AttrLinkNamespace])
	assert.Equal(t, "web", link[aggregator.AttrLinkName])
	assert.Equal(t, "parent", link[aggregator.AttrLinkRole])
	assert.Equal(t, "children", link[aggregator.AttrLinkClass])
	event := attrs(got[2].Attributes)
	assert.Equal(t, "alice", event[aggregator.AttrUser])
	assert.Equal(t, "c1-alias", event[aggregator.AttrCluster], "span attributes win")

	assert.Equal(t, codes.Unset, got[0].Status.Code)
	assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: "conflict"}, got[2].Status)
	require.Len(t, got[2].Events, 2)
	ev := got[2].Events[0]
	assert.Equal(t, aggregator.LogTypeError, ev.Name)
	assert.True(t, in[2].Logs[0].Time.Equal(ev.Time))
	assert.Equal(t, map[string]string{AttrLogMessage: "conflict", "code": "409"}, attrs(ev.Attributes))
	ev = got[2].Events[1]
	assert.Equal(t, defaultEventName, ev.Name)
	assert.True(t, in[2].Start.Equal(ev.Time), "a log without time gets the span start")
	assert.Equal(t, map[string]string{AttrLogMessage: "no time"}, attrs(ev.Attributes))
}

func TestBatchesBySize(t *testing.T) {
	ctx := context.Background()
	m, mp := newMetrics()
	rec := &recorder{}
	s := newSink(t, Config{BatchSize: 3, FlushInterval: time.Hour}, rec, mp)
	require.NoError(t, s.Start(ctx))
	require.NoError(t, s.Export(ctx, manySpans(7)))
	require.Eventually(t, func() bool {
		b, _, _ := rec.state()
		return len(b) == 2
	}, 5*time.Second, time.Millisecond)
	b, _, _ := rec.state()
	assert.Equal(t, []int{3, 3}, b)

	require.NoError(t, s.Stop(ctx))
	b, _, shutdown := rec.state()
	assert.Equal(t, []int{3, 3, 1}, b, "Stop flushes the rest")
	assert.True(t, shutdown)
	assert.Equal(t, int64(7), m.value(t, "kelemetry.otlp.spans.exported", ""))
	assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
}

func TestBatchesByInterval(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	s := newSink(t, Config{BatchSize: 100, FlushInterval: 20 * time.Millisecond}, rec, nil)
	require.NoError(t, s.Start(ctx))
	require.NoError(t, s.Export(ctx, manySpans(2)))
	require.Eventually(t, func() bool {
		b, _, _ := rec.state()
		return len(b) == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Export(ctx, manySpans(1)))
	require.Eventually(t, func() bool {
		b, _, _ := rec.state()
		return len(b) == 2
	}, 5*time.Second, time.Millisecond)
	b, _, _ := rec.state()
	assert.Equal(t, []int{2, 1}, b)
}

// With DropWhenFull, spans that do not fit are dropped and counted, all of one Export or none.
func TestQueueFullDropsAndCounts(t *testing.T) {
	ctx := context.Background()
	m, mp := newMetrics()
	rec := &recorder{}
	// Not started: nothing drains the queue.
	s := newSink(t, Config{QueueSize: 2, EnqueueTimeout: 10 * time.Millisecond, DropWhenFull: true}, rec, mp)
	require.NoError(t, s.Export(ctx, manySpans(2)))
	err := s.Export(ctx, manySpans(3))
	require.ErrorIs(t, err, errQueueFull)
	assert.NotErrorIs(t, err, aggregator.ErrSinkBusy, "dropped, not to be retried")
	assert.Contains(t, err.Error(), "dropped 3 spans")
	assert.Equal(t, int64(3), m.value(t, "kelemetry.otlp.spans.dropped", reasonQueueFull))
	assert.NoError(t, s.Health(ctx), "a sink that drops never reports busy")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = s.Export(cctx, manySpans(1))
	require.ErrorIs(t, err, errQueueFull)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(4), m.value(t, "kelemetry.otlp.spans.dropped", reasonQueueFull))

	require.NoError(t, s.Stop(ctx))
	b, _, _ := rec.state()
	assert.Equal(t, []int{2}, b, "Stop without Start flushes the queue")
	assert.Equal(t, int64(2), m.value(t, "kelemetry.otlp.spans.exported", ""))

	err = s.Export(ctx, manySpans(2))
	require.ErrorIs(t, err, errStopped)
	assert.Equal(t, int64(2), m.value(t, "kelemetry.otlp.spans.dropped", reasonStopped))
	require.NoError(t, s.Stop(ctx), "second Stop")
	require.NoError(t, s.Start(ctx), "Start after Stop does nothing")
}

// Without DropWhenFull (the default) a full queue refuses an Export whole with an error wrapping
// aggregator.ErrSinkBusy (so the audit consumer retries it), drops nothing, and Health reports
// the sink busy (so the webhook answers 429) until the queue drains.
func TestQueueFullRefusesAndReportsBusy(t *testing.T) {
	ctx := context.Background()
	m, mp := newMetrics()
	rec := &recorder{}
	s := newSink(t, Config{QueueSize: 4, BatchSize: 2, EnqueueTimeout: 10 * time.Millisecond, FlushInterval: time.Millisecond}, rec, mp)
	require.NoError(t, s.Export(ctx, manySpans(3)))
	require.NoError(t, s.Health(ctx), "75% full is not busy")
	require.NoError(t, s.Export(ctx, manySpans(1)))
	err := s.Health(ctx)
	require.ErrorIs(t, err, aggregator.ErrSinkBusy)
	err = s.Export(ctx, manySpans(2))
	require.ErrorIs(t, err, errQueueFull)
	require.ErrorIs(t, err, aggregator.ErrSinkBusy)
	require.ErrorIs(t, err, aggregator.ErrSinkUnavailable, "the audit consumer retries it")
	assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
	assert.Equal(t, int64(2), m.value(t, "kelemetry.otlp.spans.refused", ""))

	require.NoError(t, s.Start(ctx))
	require.Eventually(t, func() bool { return s.Health(ctx) == nil }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Export(ctx, manySpans(2)), "the retry is taken")
	require.NoError(t, s.Stop(ctx))
	assert.Equal(t, int64(6), m.value(t, "kelemetry.otlp.spans.exported", ""))
	assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
}

// The queue is bounded by the estimated bytes of its spans too.
func TestQueueBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	sp := manySpans(1)[0]
	one := spanBytes(sp)
	s := newSink(t, Config{MaxQueueBytes: 2*one + 1, EnqueueTimeout: -1}, &recorder{}, nil)
	require.NoError(t, s.Export(ctx, manySpans(2)))
	require.ErrorIs(t, s.Health(ctx), aggregator.ErrSinkBusy)
	require.ErrorIs(t, s.Export(ctx, manySpans(1)), aggregator.ErrSinkBusy)
	n, b := s.queue.size()
	assert.Equal(t, 2, n)
	assert.Equal(t, 2*one, b)
}

func TestQueueFullNoWait(t *testing.T) {
	s := newSink(t, Config{QueueSize: 1, EnqueueTimeout: -1}, &recorder{}, nil)
	require.NoError(t, s.Export(context.Background(), manySpans(1)))
	start := time.Now()
	require.ErrorIs(t, s.Export(context.Background(), manySpans(3)), errQueueFull)
	assert.Less(t, time.Since(start), time.Second)
}

// By default a failing batch is retried until it is sent: nothing is dropped.
func TestExportRetriesUntilSent(t *testing.T) {
	for _, failures := range []int{1, 8} {
		t.Run(fmt.Sprint(failures, " failures"), func(t *testing.T) {
			ctx := context.Background()
			m, mp := newMetrics()
			rec := &recorder{fail: func(call int) error {
				if call <= failures {
					return errors.New("unavailable")
				}
				return nil
			}}
			s := newSink(t, Config{RetryBackoff: time.Millisecond}, rec, mp)
			require.NoError(t, s.Start(ctx))
			require.NoError(t, s.Export(ctx, manySpans(2)))
			require.NoError(t, s.Stop(ctx))
			b, calls, _ := rec.state()
			assert.Equal(t, failures+1, calls)
			assert.Equal(t, []int{2}, b)
			assert.Equal(t, int64(2), m.value(t, "kelemetry.otlp.spans.exported", ""))
			assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
			assert.Equal(t, int64(failures), m.value(t, "kelemetry.otlp.export.failures", ""))
		})
	}
}

func TestExportRetriesThenDrops(t *testing.T) {
	ctx := context.Background()
	m, mp := newMetrics()
	rec := &recorder{fail: func(int) error { return errors.New("unavailable") }}
	s := newSink(t, Config{MaxRetries: 2, RetryBackoff: time.Millisecond}, rec, mp)
	require.NoError(t, s.Start(ctx))
	require.NoError(t, s.Export(ctx, manySpans(2)))
	require.NoError(t, s.Stop(ctx))
	_, calls, _ := rec.state()
	assert.Equal(t, 3, calls, "one attempt and two retries")
	assert.Equal(t, int64(2), m.value(t, "kelemetry.otlp.spans.dropped", reasonExportFailed))
	assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.exported", ""))
}

func TestStopDeadlineDropsAndCounts(t *testing.T) {
	ctx := context.Background()
	m, mp := newMetrics()
	rec := &recorder{block: func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	s := newSink(t, Config{}, rec, mp)
	require.NoError(t, s.Start(ctx))
	require.NoError(t, s.Export(ctx, manySpans(3)))
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := s.Stop(sctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int64(3), m.value(t, "kelemetry.otlp.spans.dropped", reasonStopped))
	// The worker must not outlive Stop.
	goleak.VerifyNone(t)
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{Protocol: "http", Endpoint: "https://collector:4318/v1/traces"}, true},
		{Config{Endpoint: "collector:4317"}, true},
		{Config{Endpoint: "collector"}, false},
		{Config{Endpoint: "https://collector:4318", Insecure: true}, false},
		{Config{Insecure: true, TLS: TLSConfig{Enabled: true}}, false},
		{Config{TLS: TLSConfig{CertFile: "a.crt"}}, false},
		{Config{MaxQueueBytes: -1}, false},
		{Config{Protocol: "grpc", Endpoint: "collector:4317", Insecure: true, Compression: "gzip"}, true},
		{Config{Protocol: "thrift"}, false},
		{Config{Compression: "zstd"}, false},
		{Config{Endpoint: "ftp://collector"}, false},
		{Config{QueueSize: -1}, false},
		{Config{FlushInterval: -time.Second}, false},
	} {
		err := tc.cfg.Validate()
		assert.Equal(t, tc.ok, err == nil, "%+v: %v", tc.cfg, err)
	}
	c := Config{}.withDefaults()
	assert.Equal(t, int64(defaultMaxQueueBytes), c.MaxQueueBytes)
	assert.Equal(t, defaultQueueSize, c.QueueSize)
	assert.Equal(t, defaultBatchSize, c.BatchSize)
	assert.Equal(t, defaultFlushInterval, c.FlushInterval)
	assert.Equal(t, defaultEnqueueTimeout, c.EnqueueTimeout)

	_, err := New(context.Background(), Config{Protocol: "thrift"}, telemetry.Settings{})
	assert.Error(t, err)
	_, err = NewWithExporter(Config{}, nil, telemetry.Settings{})
	assert.Error(t, err)
}

// A request span (kube-apiserver's span of an event's request, audit/apitrace) is exported
// under its event span with kelemetry.span.kind=request and its service.
func TestRequestSpanExported(t *testing.T) {
	ctx := context.Background()
	mem := keepExporter{tracetest.NewInMemoryExporter()}
	s := newSink(t, Config{}, mem, nil)
	require.NoError(t, s.Start(ctx))
	ev := testSpans()[2]
	req := &aggregator.Span{
		TraceID: ev.TraceID, SpanID: aggregator.RequestSpanID(ev.TraceID, ev.SpanID, "00000000000000aa"), ParentID: ev.SpanID,
		Kind: aggregator.KindRequest, Source: "apiserver", Name: "Call validating webhook", Object: ev.Object, Window: ev.Window,
		Start: ev.Start.Add(200), End: ev.Start.Add(900), Attributes: aggregator.Attrs{{Key: "webhook", Value: "policy.example.com"}},
	}
	require.NoError(t, s.Export(ctx, []*aggregator.Span{ev, req}))
	require.NoError(t, s.Stop(ctx))
	got := mem.GetSpans()
	require.Len(t, got, 2)
	g := got[1]
	assert.Equal(t, req.SpanID, g.SpanContext.SpanID())
	assert.Equal(t, ev.SpanID, g.Parent.SpanID())
	svc, _ := g.Resource.Set().Value(AttrServiceName)
	assert.Equal(t, "apiserver", svc.AsString())
	kinds := map[string]string{}
	for _, kv := range g.Attributes {
		kinds[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "request", kinds[AttrSpanKind])
	assert.Equal(t, "policy.example.com", kinds["webhook"])
}
