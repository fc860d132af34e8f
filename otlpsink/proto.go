package otlpsink

import (
	"go.opentelemetry.io/otel/attribute"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kelemetry/kelemetry/aggregator"
)

// spanFlags are the flags the OTLP exporter gives a sampled span whose parent is local.
const spanFlags = uint32(1) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)

// protoConverter turns aggregator spans straight into the OTLP request messages, the ones the
// SDK's exporter builds from converter.span's snapshots (sdk spans, then tracetransform), without
// the snapshots in between. It is used by one goroutine at a time; the resources and the scope
// it hands out are shared by the requests and only read by the client.
type protoConverter struct {
	resources map[string]*resourcepb.Resource
	scope     *commonpb.InstrumentationScope
}

func newProtoConverter() *protoConverter {
	return &protoConverter{resources: map[string]*resourcepb.Resource{}, scope: &commonpb.InstrumentationScope{Name: scopeName}}
}

func (c *protoConverter) resource(source string) *resourcepb.Resource {
	if source == "" {
		source = defaultService
	}
	if r, ok := c.resources[source]; ok {
		return r
	}
	r := &resourcepb.Resource{Attributes: keyValues([]attribute.KeyValue{attribute.String(AttrServiceName, source)})}
	if len(c.resources) < maxResources {
		c.resources[source] = r
	}
	return r
}

// request converts batch into one ResourceSpans per Source (in the order first seen), each with
// one ScopeSpans.
func (c *protoConverter) request(batch []*aggregator.Span) []*tracepb.ResourceSpans {
	var out []*tracepb.ResourceSpans
	bySource := map[string]*tracepb.ScopeSpans{}
	for _, sp := range batch {
		ss, ok := bySource[sp.Source]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: c.scope, Spans: []*tracepb.Span{}}
			bySource[sp.Source] = ss
			out = append(out, &tracepb.ResourceSpans{Resource: c.resource(sp.Source), ScopeSpans: []*tracepb.ScopeSpans{ss}})
		}
		ss.Spans = append(ss.Spans, c.span(sp))
	}
	return out
}

// span is converter.span as the exporter encodes it.
func (c *protoConverter) span(sp *aggregator.Span) *tracepb.Span {
	s := &tracepb.Span{
		TraceId:           sp.TraceID[:],
		SpanId:            sp.SpanID[:],
		Status:            &tracepb.Status{},
		StartTimeUnixNano: unixNano(sp.Start.UnixNano()),
		EndTimeUnixNano:   unixNano(sp.End.UnixNano()),
		Kind:              tracepb.Span_SPAN_KIND_INTERNAL,
		Name:              sp.Name,
		Attributes:        keyValues(attributes(sp)),
		Flags:             spanFlags,
	}
	if sp.ParentID.IsValid() {
		s.ParentSpanId = sp.ParentID[:]
	}
	if len(sp.Logs) > 0 {
		events := make([]tracepb.Span_Event, len(sp.Logs))
		s.Events = make([]*tracepb.Span_Event, len(sp.Logs))
		var attrs []attribute.KeyValue
		for i := range sp.Logs {
			l := &sp.Logs[i]
			ev := &events[i]
			ev.Name = l.Type
			if ev.Name == "" {
				ev.Name = defaultEventName
			}
			t := l.Time
			if t.IsZero() {
				t = sp.Start
			}
			ev.TimeUnixNano = unixNano(t.UnixNano())
			attrs = attrs[:0]
			if l.Message != "" {
				attrs = append(attrs, attribute.String(AttrLogMessage, l.Message))
			}
			attrs = appendAttrs(attrs, 0, l.Attributes)
			ev.Attributes = keyValues(attrs)
			s.Events[i] = ev
		}
	}
	if sp.Error {
		s.Status.Code = tracepb.Status_STATUS_CODE_ERROR
		for i := range sp.Logs {
			if sp.Logs[i].Type == aggregator.LogTypeError {
				s.Status.Message = sp.Logs[i].Message
				break
			}
		}
	}
	return s
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

// keyValues converts string attributes (all the sink makes), in order, allocating the messages
// of all of them at once. Nil when there are none, as the exporter has it.
func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	kvs := make([]commonpb.KeyValue, len(attrs))
	vals := make([]commonpb.AnyValue, len(attrs))
	strs := make([]commonpb.AnyValue_StringValue, len(attrs))
	out := make([]*commonpb.KeyValue, len(attrs))
	for i, a := range attrs {
		strs[i].StringValue = a.Value.AsString()
		vals[i].Value = &strs[i]
		kvs[i].Key = string(a.Key)
		kvs[i].Value = &vals[i]
		out[i] = &kvs[i]
	}
	return out
}
