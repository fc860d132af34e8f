package query

import (
	"encoding/json"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Request spans (aggregator.KindRequest) are kube-apiserver's own spans of the request an audit
// event records, stored under the event span. The tree and timeline modes draw them as child
// spans of the event; the folded modes (tracing, grouped) put a summary in the event's log
// (field requestField), from which the UI draws the request's waterfall; the critical path
// names the slowest part of each step's request.

// requestField is the folded event's field holding its request's summary (requestPart JSON).
const requestField = "request"

// requestPart is one span of a request as the folded summary gives it.
type requestPart struct {
	Name string `json:"name"`
	// Detail names what the part waited for: the webhook, the etcd key.
	Detail string `json:"detail,omitempty"`
	// StartMicros and DurationMicros are in Unix microseconds, as the Jaeger API's times.
	StartMicros    int64 `json:"start"`
	DurationMicros int64 `json:"duration"`
	// Depth is 0 for the request's entry spans, 1 for their children, ...
	Depth int  `json:"depth"`
	Error bool `json:"error,omitempty"`
}

// maxRequestParts bounds the parts of one folded summary.
const maxRequestParts = 64

// requestTree orders a request's spans depth first (children by start), with their depth.
func requestTree(spans []*aggregator.Span) (order []*aggregator.Span, depth []int) {
	ids := make(map[trace.SpanID]bool, len(spans))
	for _, sp := range spans {
		ids[sp.SpanID] = true
	}
	kids := map[trace.SpanID][]*aggregator.Span{}
	var roots []*aggregator.Span
	for _, sp := range spans { // spans are sorted by start: so are the lists
		if ids[sp.ParentID] && sp.ParentID != sp.SpanID {
			kids[sp.ParentID] = append(kids[sp.ParentID], sp)
		} else {
			roots = append(roots, sp)
		}
	}
	seen := make(map[trace.SpanID]bool, len(spans))
	var visit func(sp *aggregator.Span, d int)
	visit = func(sp *aggregator.Span, d int) {
		if seen[sp.SpanID] {
			return
		}
		seen[sp.SpanID] = true
		order = append(order, sp)
		depth = append(depth, d)
		for _, c := range kids[sp.SpanID] {
			visit(c, d+1)
		}
	}
	for _, r := range roots {
		visit(r, 0)
	}
	return order, depth
}

// partDetail is what a request span waited for, when its attributes say: the admission webhook,
// or the etcd key.
func partDetail(sp *aggregator.Span) string {
	if w, ok := sp.Attributes.Get("webhook"); ok && w != "" {
		return w
	}
	if strings.HasSuffix(sp.Name, " etcd3") {
		if k, ok := sp.Attributes.Get("key"); ok {
			return k
		}
	}
	return ""
}

// partLabel names a request span for people: "validating webhook policy.example.com",
// "etcd GuaranteedUpdate /registry/pods/ns/name", or its own name.
func partLabel(sp *aggregator.Span) string {
	d := partDetail(sp)
	switch {
	case sp.Name == "Call validating webhook":
		return strings.TrimSpace("validating webhook " + d)
	case sp.Name == "Call mutating webhook":
		return strings.TrimSpace("mutating webhook " + d)
	case strings.HasSuffix(sp.Name, " etcd3"):
		return strings.TrimSpace("etcd " + strings.TrimSuffix(sp.Name, " etcd3") + " " + d)
	}
	return sp.Name
}

// requestSummary is the JSON of a request's parts for a folded event ("" without spans).
func requestSummary(spans []*aggregator.Span) string {
	if len(spans) == 0 {
		return ""
	}
	order, depth := requestTree(spans)
	if len(order) > maxRequestParts {
		order, depth = order[:maxRequestParts], depth[:maxRequestParts]
	}
	parts := make([]requestPart, len(order))
	for i, sp := range order {
		parts[i] = requestPart{Name: sp.Name, Detail: partDetail(sp), StartMicros: sp.Start.UnixMicro(),
			DurationMicros: max(sp.End.Sub(sp.Start).Microseconds(), 0), Depth: depth[i], Error: sp.Error}
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return ""
	}
	return string(b)
}

// slowPart names the part of a request that took its time: of the spans below the request's
// entry, the one that held it longest by itself (its duration less its children's), where an
// admission webhook call or an etcd call counts whole (its HTTP client span is part of it).
// ok is false without request spans below the entry.
func slowPart(spans []*aggregator.Span) (label string, d time.Duration, ok bool) {
	order, depth := requestTree(spans)
	byID := make(map[trace.SpanID]*aggregator.Span, len(order))
	for _, sp := range order {
		byID[sp.SpanID] = sp
	}
	// The time each span's children cover (summed; children of one span rarely overlap).
	covered := map[trace.SpanID]time.Duration{}
	for _, sp := range order {
		if p, has := byID[sp.ParentID]; has && !whole(p) {
			covered[p.SpanID] += sp.End.Sub(sp.Start)
		}
	}
	for i, sp := range order {
		if depth[i] == 0 || inWhole(sp, byID) {
			continue
		}
		self := sp.End.Sub(sp.Start)
		if !whole(sp) {
			self -= covered[sp.SpanID]
		}
		if !ok || self > d {
			label, d, ok = partLabel(sp), self, true
		}
	}
	return label, max(d, 0), ok
}

// whole reports a span that counts whole as a part: an admission webhook or etcd call.
func whole(sp *aggregator.Span) bool {
	return sp.Name == "Call validating webhook" || sp.Name == "Call mutating webhook" || strings.HasSuffix(sp.Name, " etcd3")
}

// inWhole reports a span below a whole part (a webhook call's HTTP client span).
func inWhole(sp *aggregator.Span, byID map[trace.SpanID]*aggregator.Span) bool {
	for range 64 {
		p, ok := byID[sp.ParentID]
		if !ok {
			return false
		}
		if whole(p) {
			return true
		}
		sp = p
	}
	return false
}

// addRequests draws a request's spans as child spans of its event node (tree, timeline).
func addRequests(ev *node, spans []*aggregator.Span) {
	if len(spans) == 0 {
		return
	}
	nodes := make(map[trace.SpanID]*node, len(spans))
	for _, sp := range spans {
		nodes[sp.SpanID] = &node{kind: nodeRequest, id: sp.SpanID, req: sp, service: sp.Source, operation: sp.Name, start: sp.Start, end: sp.End}
	}
	for _, sp := range spans { // by start: children stay in that order
		n := nodes[sp.SpanID]
		if p, ok := nodes[sp.ParentID]; ok && p != n {
			p.add(n)
		} else {
			ev.add(n)
		}
	}
}
