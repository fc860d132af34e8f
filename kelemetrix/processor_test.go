package kelemetrix

import (
	"context"
	"errors"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// points collects r and returns the points of metric name: "k=v,k=v" (sorted) -> counter value,
// or histogram count.
func points(t *testing.T, r *sdkmetric.ManualReader, name string) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					out[attrString(p.Attributes)] += p.Value
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[attrString(p.Attributes)] += float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[attrString(p.Attributes)] += float64(p.Count)
				}
			default:
				t.Fatalf("metric %s has data %T", name, m.Data)
			}
		}
	}
	return out
}

func attrString(set attribute.Set) string {
	var parts []string
	for _, kv := range set.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// newTestProcessor builds a processor of cfg with a manual reader.
func newTestProcessor(t *testing.T, cfg Config) (*Processor, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	p, err := New(cfg, telemetry.Settings{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func req(user, verb, resource string, code int32, d time.Duration) *auditv1.Event {
	return &auditv1.Event{AuditID: "id", Stage: "ResponseComplete", Verb: verb, User: auditv1.UserInfo{Username: user},
		RequestURI: "/api/v1/" + resource, ObjectRef: &auditv1.ObjectReference{Resource: resource, APIVersion: "v1"},
		ResponseStatus: &auditv1.Status{Code: code}, RequestReceivedTimestamp: t0, StageTimestamp: t0.Add(d)}
}

func counter(name string, labels ...string) MetricConfig {
	return MetricConfig{Name: name, Kind: kindCounter, Quantity: quantityRequestCount, Labels: labels}
}

func TestTagFilters(t *testing.T) {
	evs := []*auditv1.Event{
		req("alice", "list", "pods", 200, time.Second),
		req("bob", "get", "pods", 404, time.Second),
		req("system:serviceaccount:kube-system:x", "watch", "pods", 200, time.Second),
	}
	for _, c := range []struct {
		name   string
		filter tagFilter
		want   map[string]float64
	}{
		{"oneOf", tagFilter{Tag: tagVerb, OneOf: []string{"list", "get"}}, map[string]float64{"user=alice": 1, "user=bob": 1}},
		{"oneOf negate", tagFilter{Tag: tagVerb, OneOf: []string{"list", "get"}, Negate: true}, map[string]float64{"user=system:serviceaccount:kube-system:x": 1}},
		{"regex whole value", tagFilter{Tag: tagUser, Regex: `system:serviceaccount:.*`}, map[string]float64{"user=system:serviceaccount:kube-system:x": 1}},
		{"regex is anchored", tagFilter{Tag: tagUser, Regex: `serviceaccount`}, map[string]float64{}},
		{"regex negate", tagFilter{Tag: tagUser, Regex: `system:.*`, Negate: true}, map[string]float64{"user=alice": 1, "user=bob": 1}},
		{"oneOf or regex", tagFilter{Tag: tagUser, OneOf: []string{"alice"}, Regex: `b.b`}, map[string]float64{"user=alice": 1, "user=bob": 1}},
		{"code class", tagFilter{Tag: tagCodeClass, OneOf: []string{"4xx", "5xx"}}, map[string]float64{"user=bob": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := counter("m", tagUser)
			m.TagFilters = []tagFilter{c.filter}
			p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{m}})
			p.Handle(context.Background(), "c", evs)
			got := points(t, r, "m")
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestQuantityFilters(t *testing.T) {
	evs := []*auditv1.Event{
		req("a", "list", "pods", 200, 10*time.Second),                                    // latency ratio 1/6 of the default 60s
		req("b", "list", "pods", 200, 30*time.Second),                                    // 0.5
		req("c", "list", "pods", 200, 45*time.Second),                                    // 0.75
		{Stage: "ResponseComplete", User: auditv1.UserInfo{Username: "d"}, Verb: "list"}, // no latency
	}
	for _, c := range []struct {
		op   string
		want string
	}{
		{"<", "a"}, {"<=", "a,b"}, {">", "c"}, {">=", "b,c"},
	} {
		t.Run(c.op, func(t *testing.T) {
			m := counter("m", tagUser)
			m.QuantityFilters = []quantityFilter{{Quantity: quantityLatencyRatio, Op: c.op, Threshold: 0.5}}
			p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{m}})
			p.Handle(context.Background(), "c", evs)
			var users []string
			for k := range points(t, r, "m") {
				users = append(users, strings.TrimPrefix(k, "user="))
			}
			sort.Strings(users)
			if got := strings.Join(users, ","); got != c.want {
				t.Fatalf("%s 0.5 passed %q, want %q", c.op, got, c.want)
			}
		})
	}
}

func TestStagesDefaultToCompletion(t *testing.T) {
	received := req("a", "get", "pods", 0, 0)
	received.Stage, received.ResponseStatus = "RequestReceived", nil
	started := req("a", "watch", "pods", 200, 0)
	started.Stage = "ResponseStarted"
	panicked := req("a", "get", "pods", 500, time.Second)
	panicked.Stage = "Panic"
	evs := []*auditv1.Event{received, started, req("a", "get", "pods", 200, time.Second), panicked}

	all := counter("all_stages", tagStage)
	all.Stages = stages
	p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{counter("default_stages", tagStage), all}})
	p.Handle(context.Background(), "c", evs)
	if got := points(t, r, "default_stages"); len(got) != 2 || got["stage=ResponseComplete"] != 1 || got["stage=Panic"] != 1 {
		t.Errorf("default stages: %v, want ResponseComplete and Panic once each", got)
	}
	if got := points(t, r, "all_stages"); len(got) != 4 {
		t.Errorf("all stages: %v, want 4 series", got)
	}
}

// TestCardinalityCapFoldsIntoOther: maxSeries bounds the series, the other one included.
func TestCardinalityCapFoldsIntoOther(t *testing.T) {
	m := counter("m", tagUser, tagVerb)
	m.MaxSeries = 3
	p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{m}})
	var evs []*auditv1.Event
	for _, u := range []string{"u1", "u2", "u3", "u4", "u1", "u2", "u3"} {
		evs = append(evs, req(u, "get", "pods", 200, time.Second))
	}
	p.Handle(context.Background(), "c", evs)
	want := map[string]float64{"user=u1,verb=get": 2, "user=u2,verb=get": 2, "user=other,verb=other": 3}
	got := points(t, r, "m")
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if of := points(t, r, "kelemetry.kelemetrix.series_overflow"); of["metric=m"] != 3 {
		t.Errorf("overflow %v, want 3 for metric m", of)
	}
}

func TestHistogramAndSkippedQuantity(t *testing.T) {
	m := MetricConfig{Name: "size", Kind: kindHistogram, Quantity: quantityResponseSize, Labels: []string{tagVerb}, Buckets: []float64{10, 100}}
	lat := MetricConfig{Name: "lat", Kind: kindHistogram, Quantity: quantityLatency, Labels: []string{tagVerb}}
	p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{m, lat}})
	withBody := req("a", "get", "pods", 200, time.Second)
	withBody.ResponseObject = []byte(`{"kind":"Pod","apiVersion":"v1"}`)
	p.Handle(context.Background(), "c", []*auditv1.Event{withBody, req("a", "get", "pods", 200, time.Second)})
	if got := points(t, r, "size"); got["verb=get"] != 1 {
		t.Errorf("size histogram %v: want one point (the event without a body has no size)", got)
	}
	if got := points(t, r, "lat"); got["verb=get"] != 2 {
		t.Errorf("latency histogram %v: want 2 points", got)
	}
	if p.Updates() != 3 {
		t.Errorf("%d updates, want 3", p.Updates())
	}
}

// TestOnlyUsedTagsAreComputed: an event's tags are computed once, and only those the metrics use
// in labels and filters.
func TestOnlyUsedTagsAreComputed(t *testing.T) {
	m1 := counter("m1", tagUser)
	m1.TagFilters = []tagFilter{{Tag: tagVerb, OneOf: []string{"get"}}}
	m2 := counter("m2", tagUser, tagResource)
	p, _ := newTestProcessor(t, Config{Metrics: []MetricConfig{m1, m2}})
	env := quantityEnv{now: t0, defaultTimeout: time.Minute}
	st := eventState{cluster: "c", ev: req("a", "get", "pods", 200, time.Second), env: &env}
	for _, m := range p.metrics {
		m.observe(context.Background(), &st, p.overflow)
	}
	var computed []string
	for id, tg := range tags {
		if st.tagHave&(1<<id) != 0 {
			computed = append(computed, tg.name)
		}
	}
	sort.Strings(computed)
	if got := strings.Join(computed, ","); got != "resource,user,verb" {
		t.Errorf("computed tags %s, want resource,user,verb", got)
	}
	if st.qHave != 1<<0 {
		t.Errorf("computed quantities %b, want requestCount only", st.qHave)
	}
}

// TestObserverDropsWhenFull: ObserveAudit never blocks; batches beyond QueueSize are dropped and
// counted, and what was accepted is handled by Stop.
func TestObserverDropsWhenFull(t *testing.T) {
	p, r := newTestProcessor(t, Config{QueueSize: 3, Metrics: []MetricConfig{counter("m", tagUser)}})
	batch := []*auditv1.Event{req("a", "get", "pods", 200, 0), req("a", "get", "pods", 200, 0)}
	p.ObserveAudit("c", batch) // accepted (2)
	p.ObserveAudit("c", batch) // 4 > 3: dropped
	if err := p.Enqueue(context.Background(), "c", batch); !errors.Is(err, queue.ErrFull) {
		t.Errorf("Enqueue on a full queue: %v, want ErrQueueFull", err)
	}
	if p.Len() != 2 {
		t.Errorf("Len %d, want 2", p.Len())
	}
	if d := points(t, r, "kelemetry.kelemetrix.dropped_events"); d["reason=queue_full"] != 2 {
		t.Errorf("dropped %v, want 2 queue_full", d)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.EnqueueWait(ctx, "c", batch); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := points(t, r, "m"); got["user=a"] != 4 {
		t.Errorf("m %v, want 4 for user a", got)
	}
	p.ObserveAudit("c", batch)
	if err := p.Enqueue(ctx, "c", batch); !errors.Is(err, queue.ErrStopped) {
		t.Errorf("Enqueue after Stop: %v, want ErrStopped", err)
	}
	if d := points(t, r, "kelemetry.kelemetrix.dropped_events"); d["reason=stopped"] != 2 {
		t.Errorf("dropped %v, want 2 stopped", d)
	}
}

// TestQueueBytesBound: batches beyond QueueBytes (auditv1.EventBytes) are dropped and counted
// (reason queue_bytes), or refused with ErrFull; a batch larger than the bound is taken when
// nothing waits; EnqueueWait waits for room.
func TestQueueBytesBound(t *testing.T) {
	big := func() *auditv1.Event {
		ev := req("a", "get", "pods", 200, 0)
		ev.ResponseObject = make([]byte, 1000)
		return ev
	}
	one := []*auditv1.Event{big()}
	size := auditv1.EventBytes(one[0])
	p, r := newTestProcessor(t, Config{QueueBytes: size + size/2, Metrics: []MetricConfig{counter("m", tagUser)}})
	p.ObserveAudit("c", one) // accepted
	p.ObserveAudit("c", one) // 2 x size > 1.5 x size: dropped
	if err := p.Enqueue(context.Background(), "c", one); !errors.Is(err, queue.ErrFull) {
		t.Errorf("Enqueue over queueBytes: %v, want ErrQueueFull", err)
	}
	if p.Len() != 1 || p.Bytes() != size {
		t.Errorf("Len %d, Bytes %d, want 1 and %d", p.Len(), p.Bytes(), size)
	}
	if d := points(t, r, "kelemetry.kelemetrix.dropped_events"); d["reason=queue_bytes"] != 1 || d["reason=queue_full"] != 0 {
		t.Errorf("dropped %v, want 1 queue_bytes", d)
	}
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := p.EnqueueWait(ctx, "c", one); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Bytes() != 0 {
		t.Errorf("Bytes %d once handled, want 0", p.Bytes())
	}
	if err := p.Enqueue(ctx, "c", []*auditv1.Event{big(), big(), nil}); err != nil {
		t.Errorf("a batch over queueBytes into an empty queue: %v", err)
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := points(t, r, "m"); got["user=a"] != 23 {
		t.Errorf("m %v, want 23 for user a", got)
	}
}

// TestEnqueueWaitWaitsForRoom: a replay into a full processor waits instead of dropping.
func TestEnqueueWaitWaitsForRoom(t *testing.T) {
	p, r := newTestProcessor(t, Config{QueueSize: 2, Metrics: []MetricConfig{counter("m", tagUser)}})
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := p.EnqueueWait(ctx, "c", []*auditv1.Event{req("a", "get", "pods", 200, 0), req("a", "get", "pods", 200, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := points(t, r, "m"); got["user=a"] != 100 {
		t.Errorf("m %v, want 100", got)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Flush(stopped); err == nil {
		t.Error("Flush after Stop: no error")
	}
}

func TestStopWithoutStart(t *testing.T) {
	p, _ := newTestProcessor(t, Config{Metrics: []MetricConfig{counter("m", tagUser)}})
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestNilEventsAreSkipped(t *testing.T) {
	p, r := newTestProcessor(t, Config{Metrics: []MetricConfig{counter("m", tagResource)}})
	p.Handle(context.Background(), "c", []*auditv1.Event{nil, {Stage: "ResponseComplete"}})
	if got := points(t, r, "m"); got["resource="] != 1 {
		t.Errorf("m %v, want 1 point for the event without objectRef", got)
	}
}

// TestOwnCountersStartAtZero: kelemetrix's own counters are exported at 0 from the start, each
// reason and each configured metric included.
func TestOwnCountersStartAtZero(t *testing.T) {
	_, r := newTestProcessor(t, Config{Metrics: []MetricConfig{counter("a", tagVerb), counter("b", tagUser)}})
	for name, want := range map[string]map[string]float64{
		"kelemetry.kelemetrix.events":          {"": 0},
		"kelemetry.kelemetrix.dropped_events":  {"reason=queue_full": 0, "reason=queue_bytes": 0, "reason=stopped": 0},
		"kelemetry.kelemetrix.series_overflow": {"metric=a": 0, "metric=b": 0},
	} {
		if got := points(t, r, name); !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
