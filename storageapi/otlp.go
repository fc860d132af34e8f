package storageapi

import (
	"encoding/hex"
	"fmt"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/internal/query"
)

// warningsAttribute is the span attribute Jaeger v2 reads span warnings from (a string list).
const warningsAttribute = "@jaeger@warnings"

// scopeName is the instrumentation scope of the served spans.
const scopeName = "kelemetry"

// maxChunkBytes bounds the encoded size of one streamed TracesData message, well below gRPC's
// default 4 MiB receive limit of Jaeger's client.
const maxChunkBytes = 1 << 20

// chunks converts one drawn trace into OTLP, split into consecutive TracesData messages of at
// most about maxChunkBytes each (one span per message at least), as the streaming contract of
// jaeger.storage.v2 allows. Each message holds one ResourceSpans per Jaeger process.
func chunks(id []byte, tr query.JaegerTrace) ([]*tracev1.TracesData, error) {
	var out []*tracev1.TracesData
	err := eachChunk(id, tr, func(c *tracev1.TracesData) error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachChunk is chunks handing each message to fn as soon as it is full, so that only one
// message of a large trace is held at a time (a trace is up to query.maxRenderBytes of JSON).
func eachChunk(id []byte, tr query.JaegerTrace, fn func(*tracev1.TracesData) error) error {
	var cur *tracev1.TracesData
	var byPID map[string]*tracev1.ScopeSpans
	size := 0
	for _, js := range tr.Spans {
		sp, err := otlpSpan(id, js)
		if err != nil {
			return fmt.Errorf("span %s: %w", js.SpanID, err)
		}
		n := proto.Size(sp)
		if cur == nil || (size+n > maxChunkBytes && size > 0) {
			if cur != nil {
				if err := fn(cur); err != nil {
					return err
				}
			}
			cur = &tracev1.TracesData{}
			byPID = map[string]*tracev1.ScopeSpans{}
			size = 0
		}
		ss, ok := byPID[js.ProcessID]
		if !ok {
			ss = &tracev1.ScopeSpans{Scope: &commonv1.InstrumentationScope{Name: scopeName}}
			cur.ResourceSpans = append(cur.ResourceSpans, &tracev1.ResourceSpans{
				Resource:   resource(tr.Processes[js.ProcessID]),
				ScopeSpans: []*tracev1.ScopeSpans{ss},
			})
			byPID[js.ProcessID] = ss
		}
		ss.Spans = append(ss.Spans, sp)
		size += n
	}
	if cur != nil {
		return fn(cur)
	}
	return nil
}

func resource(p query.JaegerProcess) *resourcev1.Resource {
	attrs := make([]*commonv1.KeyValue, 0, 1+len(p.Tags))
	attrs = append(attrs, strKV("service.name", p.ServiceName))
	for _, t := range p.Tags {
		attrs = append(attrs, keyValue(t))
	}
	return &resourcev1.Resource{Attributes: attrs}
}

func otlpSpan(traceID []byte, js query.JaegerSpan) (*tracev1.Span, error) {
	spanID, err := spanIDBytes(js.SpanID)
	if err != nil {
		return nil, err
	}
	start := uint64(max(js.StartTime, 0)) * 1000
	sp := &tracev1.Span{
		TraceId:           traceID,
		SpanId:            spanID,
		Name:              js.OperationName,
		StartTimeUnixNano: start,
		EndTimeUnixNano:   start + uint64(max(js.Duration, 0))*1000,
		Attributes:        make([]*commonv1.KeyValue, 0, len(js.Tags)+1),
	}
	for i, r := range js.References {
		rid, err := spanIDBytes(r.SpanID)
		if err != nil {
			return nil, fmt.Errorf("reference: %w", err)
		}
		if i == 0 && r.RefType == "CHILD_OF" {
			sp.ParentSpanId = rid
			continue
		}
		sp.Links = append(sp.Links, &tracev1.Span_Link{TraceId: traceID, SpanId: rid})
	}
	for _, t := range js.Tags {
		if t.Key == "error" {
			if b, ok := t.Value.(bool); ok {
				if b {
					sp.Status = &tracev1.Status{Code: tracev1.Status_STATUS_CODE_ERROR}
				}
				continue
			}
		}
		sp.Attributes = append(sp.Attributes, keyValue(t))
	}
	if len(js.Warnings) > 0 {
		vals := make([]*commonv1.AnyValue, len(js.Warnings))
		for i, w := range js.Warnings {
			vals[i] = &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: w}}
		}
		sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{Key: warningsAttribute,
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{Values: vals}}}})
	}
	for _, l := range js.Logs {
		ev := &tracev1.Span_Event{TimeUnixNano: uint64(max(l.Timestamp, 0)) * 1000, Name: "log",
			Attributes: make([]*commonv1.KeyValue, 0, len(l.Fields))}
		for _, f := range l.Fields {
			if s, ok := f.Value.(string); ok && f.Key == "event" {
				ev.Name = s
				continue
			}
			ev.Attributes = append(ev.Attributes, keyValue(f))
		}
		sp.Events = append(sp.Events, ev)
	}
	return sp, nil
}

func spanIDBytes(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return nil, fmt.Errorf("span ID %q: want 16 hex digits", s)
	}
	return b, nil
}

func strKV(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

// keyValue converts a Jaeger tag by the Go type of its value; anything else is a string.
func keyValue(t query.JaegerKeyValue) *commonv1.KeyValue {
	v := &commonv1.AnyValue{}
	switch x := t.Value.(type) {
	case string:
		v.Value = &commonv1.AnyValue_StringValue{StringValue: x}
	case bool:
		v.Value = &commonv1.AnyValue_BoolValue{BoolValue: x}
	case int64:
		v.Value = &commonv1.AnyValue_IntValue{IntValue: x}
	case int:
		v.Value = &commonv1.AnyValue_IntValue{IntValue: int64(x)}
	case float64:
		v.Value = &commonv1.AnyValue_DoubleValue{DoubleValue: x}
	case []byte:
		v.Value = &commonv1.AnyValue_BytesValue{BytesValue: x}
	default:
		v.Value = &commonv1.AnyValue_StringValue{StringValue: fmt.Sprint(x)}
	}
	return &commonv1.KeyValue{Key: t.Key, Value: v}
}
