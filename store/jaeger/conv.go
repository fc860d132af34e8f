package jaeger

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// fromOTLP turns a span the OTLP sink wrote (see package otlpsink) back into the aggregator's
// span. Spans of other writers (no kelemetry.span.kind attribute) and the backend's cluster
// markers are skipped: ok is false.
func fromOTLP(service string, sp *tracev1.Span, window time.Duration) (*aggregator.Span, bool) {
	if len(sp.GetTraceId()) != 16 || len(sp.GetSpanId()) != 8 {
		return nil, false
	}
	out := &aggregator.Span{Source: service, Name: sp.GetName()}
	copy(out.TraceID[:], sp.GetTraceId())
	copy(out.SpanID[:], sp.GetSpanId())
	if len(sp.GetParentSpanId()) == 8 {
		copy(out.ParentID[:], sp.GetParentSpanId())
	}
	// OTLP times are unsigned nanoseconds that fit an int64.
	out.Start = time.Unix(0, int64(sp.GetStartTimeUnixNano())).UTC()
	out.End = time.Unix(0, int64(sp.GetEndTimeUnixNano())).UTC()
	var link aggregator.Link
	hasLink := false
	o := &out.Object
	for _, kv := range sp.GetAttributes() {
		v := anyString(kv.GetValue())
		switch kv.GetKey() {
		case otlpsink.AttrSpanKind:
			out.Kind = aggregator.SpanKind(v)
		case aggregator.AttrCluster:
			o.Cluster = v
		case aggregator.AttrGroup:
			o.Group = v
		case aggregator.AttrResource:
			o.Resource = v
		case aggregator.AttrNamespace:
			o.Namespace = v
		case aggregator.AttrName:
			o.Name = v
		case aggregator.AttrVersion:
			o.Version = v
		case aggregator.AttrUID:
			o.UID = v
		case aggregator.AttrLinkCluster:
			link.Target.Cluster, hasLink = v, true
		case aggregator.AttrLinkGroup:
			link.Target.Group, hasLink = v, true
		case aggregator.AttrLinkResource:
			link.Target.Resource, hasLink = v, true
		case aggregator.AttrLinkNamespace:
			link.Target.Namespace, hasLink = v, true
		case aggregator.AttrLinkName:
			link.Target.Name, hasLink = v, true
		case aggregator.AttrLinkRole:
			link.Role, hasLink = aggregator.Role(v), true
		case aggregator.AttrLinkClass:
			link.Class, hasLink = v, true
		default:
			out.Attributes = append(out.Attributes, aggregator.Attr{Key: kv.GetKey(), Value: v})
		}
	}
	switch out.Kind {
	case aggregator.KindObject, aggregator.KindEvent, aggregator.KindLink, aggregator.KindRequest:
	default:
		return nil, false
	}
	if hasLink && out.Kind == aggregator.KindLink {
		out.Link = &link
	}
	if _, w, ok := aggregator.ParseTraceID(out.TraceID); ok {
		out.Window = w
	} else {
		out.Window = aggregator.WindowStart(out.Start, window)
	}
	for _, ev := range sp.GetEvents() {
		l := aggregator.Log{Time: time.Unix(0, int64(ev.GetTimeUnixNano())).UTC(), Type: ev.GetName()} // fits an int64, as above
		for _, kv := range ev.GetAttributes() {
			v := anyString(kv.GetValue())
			if kv.GetKey() == otlpsink.AttrLogMessage && l.Message == "" {
				l.Message = v
				continue
			}
			l.Attributes = append(l.Attributes, aggregator.Attr{Key: kv.GetKey(), Value: v})
		}
		out.Logs = append(out.Logs, l)
	}
	out.Error = sp.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR
	return out, true
}

// serviceOf is the service.name of a resource.
func serviceOf(rs *tracev1.ResourceSpans) string {
	for _, kv := range rs.GetResource().GetAttributes() {
		if kv.GetKey() == otlpsink.AttrServiceName {
			return anyString(kv.GetValue())
		}
	}
	return ""
}

// anyString is the string form of an attribute value, as Jaeger compares them.
func anyString(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonv1.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonv1.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	case *commonv1.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return ""
	}
}

// traceSpans collects the spans of traces as they stream in, one version per span ID.
type traceSpans struct {
	window time.Duration
	byID   map[trace.TraceID]map[trace.SpanID]*aggregator.Span
	// dups counts the repeated spans dropped.
	dups int
}

func newTraceSpans(window time.Duration) *traceSpans {
	return &traceSpans{window: window, byID: map[trace.TraceID]map[trace.SpanID]*aggregator.Span{}}
}

func (t *traceSpans) add(td *tracev1.TracesData) {
	for _, rs := range td.GetResourceSpans() {
		service := serviceOf(rs)
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s, ok := fromOTLP(service, sp, t.window)
				if !ok {
					continue
				}
				spans := t.byID[s.TraceID]
				if spans == nil {
					spans = map[trace.SpanID]*aggregator.Span{}
					t.byID[s.TraceID] = spans
				}
				if old, ok := spans[s.SpanID]; ok {
					t.dups++
					if query.Newer(old, s) {
						continue // a later copy of an equal version wins, as in the other stores
					}
				}
				spans[s.SpanID] = s
			}
		}
	}
}

// sorted returns the spans of one trace sorted by (Start, SpanID); nil when none.
func (t *traceSpans) sorted(id trace.TraceID) []*aggregator.Span {
	spans := t.byID[id]
	if len(spans) == 0 {
		return nil
	}
	out := make([]*aggregator.Span, 0, len(spans))
	for _, sp := range spans {
		out = append(out, sp)
	}
	slices.SortFunc(out, query.SpanLess)
	return out
}
