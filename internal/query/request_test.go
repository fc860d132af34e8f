package query

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// requestSpans is a Pod create's event span with kube-apiserver's spans under it: the HTTP
// span, the handler, a 1.5 s validating webhook (with its HTTP client span) and an etcd call.
func requestSpans() (ev *aggregator.Span, spans []*aggregator.Span) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	tid := trace.TraceID{1}
	ev = &aggregator.Span{TraceID: tid, SpanID: trace.SpanID{9}, Kind: aggregator.KindEvent, Source: "audit", Name: "create", Start: t0, End: t0.Add(1600 * time.Millisecond)}
	mk := func(id, parent byte, name string, from, to time.Duration, attrs ...aggregator.Attr) *aggregator.Span {
		p := trace.SpanID{parent}
		if parent == 0 {
			p = ev.SpanID
		}
		return &aggregator.Span{TraceID: tid, SpanID: trace.SpanID{id}, ParentID: p, Kind: aggregator.KindRequest, Source: "apiserver",
			Name: name, Start: t0.Add(from), End: t0.Add(to), Attributes: attrs}
	}
	spans = []*aggregator.Span{
		mk(1, 0, "POST /api/v1/namespaces/{:namespace}/pods", 0, 1580*time.Millisecond),
		mk(2, 1, "Create", time.Millisecond, 1570*time.Millisecond),
		mk(3, 2, "Call validating webhook", 10*time.Millisecond, 1510*time.Millisecond, aggregator.Attr{Key: "webhook", Value: "delay.example.com"}),
		mk(4, 3, "HTTP POST", 11*time.Millisecond, 1509*time.Millisecond),
		mk(5, 2, "Create etcd3", 1520*time.Millisecond, 1560*time.Millisecond, aggregator.Attr{Key: "key", Value: "/pods/default/web-1"}),
	}
	return ev, spans
}

func TestSlowPartNamesTheWebhook(t *testing.T) {
	_, spans := requestSpans()
	label, d, ok := slowPart(spans)
	require.True(t, ok)
	assert.Equal(t, "validating webhook delay.example.com", label)
	assert.Equal(t, 1500*time.Millisecond, d)

	// Without the webhook, the etcd call is the slow part (the handler's own time is less).
	label, d, ok = slowPart([]*aggregator.Span{spans[0], spans[1], spans[4]})
	require.True(t, ok)
	assert.Equal(t, "Create", label, "the handler's own time (1.569s less 40ms) is longest")
	assert.Equal(t, 1529*time.Millisecond, d)

	_, _, ok = slowPart(spans[:1])
	assert.False(t, ok, "the request's entry alone names no part")
}

func TestGroupRequestsAndSummary(t *testing.T) {
	ev, spans := requestSpans()
	other := &aggregator.Span{SpanID: trace.SpanID{7}, Kind: aggregator.KindEvent}
	orphan := &aggregator.Span{SpanID: trace.SpanID{8}, ParentID: trace.SpanID{99}, Kind: aggregator.KindRequest, Name: "lost"}
	// Reversed and with an orphan: grouping sorts by start and leaves out what it cannot place.
	in := []*aggregator.Span{orphan}
	for i := len(spans) - 1; i >= 0; i-- {
		in = append(in, spans[i])
	}
	g := groupRequests([]*aggregator.Span{ev, other}, in)
	require.Len(t, g, 1)
	require.Len(t, g[ev.SpanID], 5)
	assert.Equal(t, "POST /api/v1/namespaces/{:namespace}/pods", g[ev.SpanID][0].Name)

	var parts []requestPart
	require.NoError(t, json.Unmarshal([]byte(requestSummary(g[ev.SpanID])), &parts))
	var got []string
	for _, p := range parts {
		got = append(got, p.Name+"/"+p.Detail+"/"+string(rune('0'+p.Depth)))
	}
	assert.Equal(t, []string{"POST /api/v1/namespaces/{:namespace}/pods//0", "Create//1", "Call validating webhook/delay.example.com/2",
		"HTTP POST//3", "Create etcd3//pods/default/web-1/2"}, got)
	assert.Equal(t, int64(1500000), parts[2].DurationMicros)
}

func TestRequestNodesInTreeAndTimeline(t *testing.T) {
	ev, spans := requestSpans()
	en := eventNode(ev)
	addRequests(en, spans)
	require.Len(t, en.children, 1)
	root := en.children[0]
	assert.Equal(t, nodeRequest, root.kind)
	require.Len(t, root.children, 1)
	handler := root.children[0]
	require.Len(t, handler.children, 2)
	assert.Equal(t, "Call validating webhook", handler.children[0].operation)
	assert.Equal(t, "Create etcd3", handler.children[1].operation)

	// The timeline moves the event under the root and keeps its request spans under it.
	obj := &node{kind: nodeObject, obj: &object{}}
	obj.add(en)
	top := &node{kind: nodeObject, obj: &object{}}
	top.add(obj)
	flatten(top)
	require.Len(t, top.children, 1)
	assert.Same(t, en, top.children[0])
	assert.Len(t, en.children, 1)

	tr := toJaeger("t", top, nil)
	kinds := map[string]int{}
	for _, sp := range tr.Spans {
		for _, tag := range sp.Tags {
			if tag.Key == "kelemetry.span.kind" {
				kinds[tag.Value.(string)]++
			}
		}
	}
	assert.Equal(t, 5, kinds["request"])
}
