package apitrace

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

func kv(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func id8(n uint64) []byte  { b := make([]byte, 8); binary.BigEndian.PutUint64(b, n); return b }
func id16(n uint64) []byte { b := make([]byte, 16); binary.BigEndian.PutUint64(b[8:], n); return b }

// apiserverRequest is a write as kube-apiserver traces it: the HTTP server span, the handler,
// a validating webhook call (with its HTTP client span) that takes webhook, and the etcd call.
func apiserverRequest(trace uint64, auditID, verb string, at time.Time, webhook time.Duration) []*tracepb.Span {
	ns := func(t time.Time) uint64 { return uint64(t.UnixNano()) }
	base := trace * 100
	end := at.Add(webhook + 30*time.Millisecond)
	return []*tracepb.Span{
		{TraceId: id16(trace), SpanId: id8(base + 1), Name: "POST /api/v1/namespaces/{:namespace}/pods", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: ns(at), EndTimeUnixNano: ns(end), Attributes: []*commonpb.KeyValue{kv("audit-id", auditID), kv("http.method", "POST")}},
		{TraceId: id16(trace), SpanId: id8(base + 2), ParentSpanId: id8(base + 1), Name: "Create", StartTimeUnixNano: ns(at.Add(time.Millisecond)),
			EndTimeUnixNano: ns(end.Add(-time.Millisecond)), Attributes: []*commonpb.KeyValue{kv("audit-id", auditID), kv("verb", verb)},
			Events: []*tracepb.Span_Event{{TimeUnixNano: ns(at.Add(2 * time.Millisecond)), Name: "About to store object in database"}}},
		{TraceId: id16(trace), SpanId: id8(base + 3), ParentSpanId: id8(base + 2), Name: "Call validating webhook",
			StartTimeUnixNano: ns(at.Add(5 * time.Millisecond)), EndTimeUnixNano: ns(at.Add(5*time.Millisecond + webhook)),
			Attributes: []*commonpb.KeyValue{kv("webhook", "delay.e2e.kelemetry.dev"), kv("configuration", "delay")}},
		{TraceId: id16(trace), SpanId: id8(base + 4), ParentSpanId: id8(base + 3), Name: "HTTP POST", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: ns(at.Add(6 * time.Millisecond)), EndTimeUnixNano: ns(at.Add(4*time.Millisecond + webhook))},
		{TraceId: id16(trace), SpanId: id8(base + 5), ParentSpanId: id8(base + 2), Name: "Create etcd3",
			StartTimeUnixNano: ns(at.Add(10*time.Millisecond + webhook)), EndTimeUnixNano: ns(at.Add(20*time.Millisecond + webhook)),
			Attributes: []*commonpb.KeyValue{kv("audit-id", auditID), kv("key", "/pods/default/web-1")}},
	}
}

func exportRequest(spans ...*tracepb.Span) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", "apiserver")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
}

// auditEvent is the consumer's event of a Pod create with auditID.
func auditEvent(auditID, name string, at time.Time) *aggregator.Event {
	return &aggregator.Event{
		Object: aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "default", Name: name}},
		Source: "audit", ID: auditID + "/ResponseComplete", Title: "create", Start: at, End: at.Add(2 * time.Second),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrAuditID, Value: auditID}, {Key: aggregator.AttrVerb, Value: "create"}},
	}
}

type harness struct {
	j    *joiner
	e    *aggregator.Engine
	sink *aggregatortest.RecordingSink
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	cfg.Enabled = true
	j := newJoiner(cfg, telemetry.Settings{})
	sink := &aggregatortest.RecordingSink{}
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Decorators: []aggregator.Decorator{j}})
	require.NoError(t, err)
	j.setExporter(e)
	require.NoError(t, e.Start(t.Context()))
	j.start()
	t.Cleanup(func() {
		require.NoError(t, j.stop(context.Background()))
		require.NoError(t, e.Stop(context.Background()))
	})
	return &harness{j: j, e: e, sink: sink}
}

func (h *harness) accept(t *testing.T, spans ...*tracepb.Span) {
	t.Helper()
	rs, bad := spansOf(exportRequest(spans...))
	require.NoError(t, h.j.accept(t.Context(), rs, bad))
}

// requestTrees renders the request spans the sink got: "event > span > span" lines, sorted,
// with each span's offset from its event and its duration.
func (h *harness) requestTrees(t *testing.T) string {
	t.Helper()
	h.j.flush(t.Context())
	byID := map[[8]byte]*aggregator.Span{}
	for _, sp := range h.sink.Spans() {
		byID[sp.SpanID] = sp
	}
	var lines []string
	for _, sp := range h.sink.Spans() {
		if sp.Kind != aggregator.KindRequest {
			continue
		}
		path := []string{sp.Name}
		cur := sp
		for {
			p, ok := byID[cur.ParentID]
			require.True(t, ok, "the parent of %s is written", cur.Name)
			if p.Kind == aggregator.KindEvent {
				path = append(path, p.Object.Name)
				break
			}
			require.Equal(t, aggregator.KindRequest, p.Kind)
			path = append(path, p.Name)
			cur = p
		}
		for i, k := 0, len(path)-1; i < k; i, k = i+1, k-1 {
			path[i], path[k] = path[k], path[i]
		}
		lines = append(lines, fmt.Sprintf("%s %s %s [%s]", strings.Join(path, " > "), sp.Start.Sub(t0), sp.End.Sub(sp.Start), sp.SpanID))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestJoinEitherOrder(t *testing.T) {
	spansFirst := newHarness(t, Config{})
	spansFirst.accept(t, apiserverRequest(1, "a-1", "POST", t0, 1500*time.Millisecond)...)
	require.NoError(t, spansFirst.e.Send(t.Context(), auditEvent("a-1", "web-1", t0)))

	eventFirst := newHarness(t, Config{})
	require.NoError(t, eventFirst.e.Send(t.Context(), auditEvent("a-1", "web-1", t0)))
	reqSpans := apiserverRequest(1, "a-1", "POST", t0, 1500*time.Millisecond)
	// Children before parents, in two batches, as a batch span processor may send them.
	eventFirst.accept(t, reqSpans[3], reqSpans[4])
	eventFirst.accept(t, reqSpans[2], reqSpans[1], reqSpans[0])

	got := spansFirst.requestTrees(t)
	assert.Equal(t, got, eventFirst.requestTrees(t), "the same spans, IDs and parents in either order")
	assert.Contains(t, got, "web-1 > POST /api/v1/namespaces/{:namespace}/pods > Create > Call validating webhook 5ms 1.5s")
	assert.Contains(t, got, "web-1 > POST /api/v1/namespaces/{:namespace}/pods > Create > Call validating webhook > HTTP POST 6ms 1.498s")
	assert.Contains(t, got, "web-1 > POST /api/v1/namespaces/{:namespace}/pods > Create > Create etcd3 1.51s 10ms")
	assert.Equal(t, 5, strings.Count(got, "\n")+1)
	for _, sp := range spansFirst.sink.Spans() {
		if sp.Kind == aggregator.KindRequest {
			assert.Equal(t, "apiserver", sp.Source)
			_, has := sp.Attributes.Get("audit-id")
			assert.False(t, has, "the audit ID is the event's, not repeated on every request span")
		}
	}
	assert.Equal(t, int64(1), spansFirst.j.requests.Value(requestsMatched))
}

func TestJoinShuffled(t *testing.T) {
	var want string
	for round := range 8 {
		h := newHarness(t, Config{})
		var spans []*tracepb.Span
		for i := range 6 {
			spans = append(spans, apiserverRequest(uint64(i+1), fmt.Sprintf("a-%d", i), "POST", t0.Add(time.Duration(i)*time.Second), time.Duration(i+1)*100*time.Millisecond)...)
		}
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		rng.Shuffle(len(spans), func(a, b int) { spans[a], spans[b] = spans[b], spans[a] })
		order := rng.Perm(6)
		cut := rng.IntN(len(spans))
		h.accept(t, spans[:cut]...)
		for _, i := range order[:3] {
			require.NoError(t, h.e.Send(t.Context(), auditEvent(fmt.Sprintf("a-%d", i), fmt.Sprintf("web-%d", i), t0.Add(time.Duration(i)*time.Second))))
		}
		h.accept(t, spans[cut:]...)
		for _, i := range order[3:] {
			require.NoError(t, h.e.Send(t.Context(), auditEvent(fmt.Sprintf("a-%d", i), fmt.Sprintf("web-%d", i), t0.Add(time.Duration(i)*time.Second))))
		}
		got := h.requestTrees(t)
		assert.Equal(t, 30, strings.Count(got, "\n")+1)
		if round == 0 {
			want = got
			continue
		}
		assert.Equal(t, want, got, "round %d", round)
	}
}

func TestJoinReadsAndStrangers(t *testing.T) {
	h := newHarness(t, Config{Wait: time.Minute})
	now := t0
	h.j.now = func() time.Time { return now }
	h.accept(t, apiserverRequest(1, "read-1", "GET", t0, time.Millisecond)...)
	// A trace without any audit ID (kube-apiserver's own audit webhook call).
	h.accept(t, &tracepb.Span{TraceId: id16(9), SpanId: id8(901), Name: "Call Audit Events webhook", StartTimeUnixNano: uint64(t0.UnixNano()), EndTimeUnixNano: uint64(t0.UnixNano()) + 1})
	// A write whose audit event never comes.
	h.accept(t, apiserverRequest(2, "lost-1", "POST", t0, time.Millisecond)...)
	bytes, _ := h.j.pendingSize()
	assert.Positive(t, bytes)
	assert.Equal(t, int64(5), h.j.spans.Value(spansSkipped))

	now = t0.Add(2 * time.Minute)
	h.j.expire()
	bytes, reqs := h.j.pendingSize()
	assert.Zero(t, bytes, "everything that waited is forgotten")
	assert.Zero(t, reqs)
	assert.Equal(t, int64(5), h.j.spans.Value(spansExpired))
	assert.Equal(t, int64(1), h.j.requests.Value(requestsExpired))
	assert.Equal(t, int64(1), h.j.spans.Value(spansUnmatched))
	assert.Empty(t, h.requestTrees(t))
}

func TestJoinFull(t *testing.T) {
	h := newHarness(t, Config{MaxPendingBytes: 2000})
	h.accept(t, apiserverRequest(1, "a-1", "POST", t0, time.Millisecond)...)
	rs, _ := spansOf(exportRequest(apiserverRequest(2, "a-2", "POST", t0, time.Millisecond)...))
	require.ErrorIs(t, h.j.accept(t.Context(), rs, 0), errFull)
	// The event of the first request frees its spans: the second is taken.
	require.NoError(t, h.e.Send(t.Context(), auditEvent("a-1", "web-1", t0)))
	require.NoError(t, h.j.accept(t.Context(), rs, 0))
}

func TestJoinEvictsBeyondMaxRequests(t *testing.T) {
	h := newHarness(t, Config{MaxRequests: 2})
	for i := range 3 {
		h.accept(t, apiserverRequest(uint64(i+1), fmt.Sprintf("a-%d", i), "POST", t0, time.Millisecond)...)
	}
	_, reqs := h.j.pendingSize()
	assert.Equal(t, 2, reqs)
	assert.Equal(t, int64(1), h.j.requests.Value(requestsEvicted))
}

// TestRecordedSpans: kube-apiserver's spans recorded by e2e TestAPIServerTraces (tracing every
// request, Kubernetes v1.37) resolve to their requests: every span finds its audit ID through its
// ancestry, the writes of Kubernetes Events are skipped (the consumer writes no event for them),
// and the requests left waiting are exactly the other writes of the recorded audit log.
func TestRecordedSpans(t *testing.T) {
	h := newHarness(t, Config{})
	n, err := replay(t.Context(), h.j, filepath.Join("..", "..", "testdata", "apiserver-traces", "apiserver-spans.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, 272, n)

	want := map[string]bool{}
	events := 0
	f, err := os.ReadFile(filepath.Join("..", "..", "testdata", "apiserver-traces", "audit.jsonl"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(f)), "\n") {
		var ev struct {
			AuditID   string `json:"auditID"`
			ObjectRef struct {
				Resource string `json:"resource"`
			} `json:"objectRef"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		if ev.ObjectRef.Resource == "events" {
			events++
			continue
		}
		want[ev.AuditID] = true
	}
	h.j.mu.Lock()
	waiting, skipped := map[string]bool{}, 0
	for id, r := range h.j.reqs {
		switch {
		case r.skip:
			skipped++
		case len(r.spans) > 0:
			waiting[id] = true
		}
	}
	unresolved := 0
	for _, te := range h.j.traces {
		unresolved += len(te.unresolved)
	}
	h.j.mu.Unlock()
	assert.Equal(t, want, waiting, "the writes the consumer records wait for their audit events")
	assert.Equal(t, events, skipped, "the writes of Kubernetes Events are skipped")
	assert.Zero(t, unresolved, "every span found its request")
	assert.Positive(t, h.j.spans.Value(spansSkipped))
}

// Audit events remembered for spans that may still come are bounded too: the oldest is evicted
// and counted.
func TestJoinEvictsEventsBeyondMaxRequests(t *testing.T) {
	h := newHarness(t, Config{MaxRequests: 2})
	for i := range 3 {
		require.NoError(t, h.e.Send(t.Context(), auditEvent(fmt.Sprintf("e-%d", i), fmt.Sprintf("web-%d", i), t0)))
	}
	_, reqs := h.j.pendingSize()
	assert.Equal(t, 2, reqs)
	assert.Equal(t, int64(1), h.j.requests.Value(requestsEvicted))
}
