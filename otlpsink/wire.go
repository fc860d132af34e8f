package otlpsink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"go.opentelemetry.io/otel/attribute"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/aggregator"
)

// wireEncoder writes the OTLP ExportTraceServiceRequest of a batch straight from the aggregator
// spans, in the protobuf wire format: the message protoConverter builds, without building it
// (its allocations) and without protobuf-go's reflective size and marshal passes, which were
// most of the sink's cost. TestWireEncoderMatchesProto decodes its output with protobuf-go and
// compares it with protoConverter's. It is used by one goroutine at a time.
type wireEncoder struct {
	attrs  []attribute.KeyValue
	groups []wireGroup
}

// wireGroup collects the encoded spans of one source (one ResourceSpans).
type wireGroup struct {
	source string
	spans  []byte
}

// Field tags (field number << 3 | wire type) of the messages written.
const (
	wireLen     = 2
	wireFixed64 = 1
	wireFixed32 = 5
	wireVarint  = 0

	tagResourceSpans = 1<<3 | wireLen // ExportTraceServiceRequest.resource_spans
	tagResource      = 1<<3 | wireLen // ResourceSpans.resource
	tagScopeSpans    = 2<<3 | wireLen // ResourceSpans.scope_spans
	tagAttributes    = 1<<3 | wireLen // Resource.attributes
	tagScope         = 1<<3 | wireLen // ScopeSpans.scope
	tagSpans         = 2<<3 | wireLen // ScopeSpans.spans
	tagScopeName     = 1<<3 | wireLen // InstrumentationScope.name
	tagKey           = 1<<3 | wireLen // KeyValue.key
	tagValue         = 2<<3 | wireLen // KeyValue.value
	tagStringValue   = 1<<3 | wireLen // AnyValue.string_value

	tagTraceID      = 1<<3 | wireLen
	tagSpanID       = 2<<3 | wireLen
	tagParentSpanID = 4<<3 | wireLen
	tagName         = 5<<3 | wireLen
	tagKind         = 6<<3 | wireVarint
	tagStart        = 7<<3 | wireFixed64
	tagEnd          = 8<<3 | wireFixed64
	tagSpanAttrs    = 9<<3 | wireLen
	tagEvents       = 11<<3 | wireLen
	tagStatus       = 15<<3 | wireLen
	tagFlags        = 16<<3 | wireFixed32 // two bytes as a varint

	tagEventTime  = 1<<3 | wireFixed64
	tagEventName  = 2<<3 | wireLen
	tagEventAttrs = 3<<3 | wireLen

	tagStatusMessage = 2<<3 | wireLen
	tagStatusCode    = 3<<3 | wireVarint

	spanKindInternal = 1
	statusCodeError  = 2
)

func sizeVarint(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// sizeField is the size of a length-delimited field of n bytes with a one-byte tag.
func sizeField(n int) int { return 1 + sizeVarint(uint64(n)) + n } // n >= 0

func appendField(b []byte, tag byte, data string) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

func appendBytesField(b []byte, tag byte, data []byte) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

func appendFixed64(b []byte, tag byte, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(append(b, tag), v)
}

// kvSize is the size of the KeyValue message of a string attribute. An empty key is left out
// (proto3); an empty string value is not (it is set in its oneof).
func kvSize(key, value string) int {
	n := sizeField(sizeField(len(value)))
	if key != "" {
		n += sizeField(len(key))
	}
	return n
}

// appendKV appends a KeyValue field (tag) of a string attribute.
func appendKV(b []byte, tag byte, key, value string) []byte {
	b = append(b, tag)
	b = binary.AppendUvarint(b, uint64(kvSize(key, value)))
	if key != "" {
		b = appendField(b, tagKey, key)
	}
	b = append(b, tagValue)
	b = binary.AppendUvarint(b, uint64(sizeField(len(value))))
	return appendField(b, tagStringValue, value)
}

func attrsSize(attrs []attribute.KeyValue) int {
	n := 0
	for _, a := range attrs {
		n += sizeField(kvSize(string(a.Key), a.Value.AsString()))
	}
	return n
}

// eventName, eventTime and the message of a log, as the exporter has them.
func eventName(l *aggregator.Log) string {
	if l.Type == "" {
		return defaultEventName
	}
	return l.Type
}

func eventTime(sp *aggregator.Span, l *aggregator.Log) uint64 {
	if l.Time.IsZero() {
		return unixNano(sp.Start.UnixNano())
	}
	return unixNano(l.Time.UnixNano())
}

func eventSize(sp *aggregator.Span, l *aggregator.Log) int {
	n := 0
	if eventTime(sp, l) != 0 {
		n += 9
	}
	n += sizeField(len(eventName(l)))
	if l.Message != "" {
		n += sizeField(kvSize(AttrLogMessage, l.Message))
	}
	for _, a := range l.Attributes {
		n += sizeField(kvSize(a.Key, a.Value))
	}
	return n
}

// statusMessage is the description of an error span: its first error log.
func statusMessage(sp *aggregator.Span) string {
	for i := range sp.Logs {
		if sp.Logs[i].Type == aggregator.LogTypeError {
			return sp.Logs[i].Message
		}
	}
	return ""
}

func statusSize(sp *aggregator.Span) int {
	if !sp.Error {
		return 0
	}
	n := 2 // code
	if m := statusMessage(sp); m != "" {
		n += sizeField(len(m))
	}
	return n
}

// appendSpan appends the Span field of sp, a ScopeSpans.spans element.
func (e *wireEncoder) appendSpan(b []byte, sp *aggregator.Span) []byte {
	e.attrs = appendSpanAttributes(e.attrs[:0], sp)
	start, end := unixNano(sp.Start.UnixNano()), unixNano(sp.End.UnixNano())
	n := sizeField(16) + sizeField(8)
	if sp.ParentID.IsValid() {
		n += sizeField(8)
	}
	if sp.Name != "" {
		n += sizeField(len(sp.Name))
	}
	n += 2 // kind
	if start != 0 {
		n += 9
	}
	if end != 0 {
		n += 9
	}
	n += attrsSize(e.attrs)
	for i := range sp.Logs {
		n += sizeField(eventSize(sp, &sp.Logs[i]))
	}
	n += sizeField(statusSize(sp))
	n += 2 + 4 // flags: a two-byte tag

	b = append(b, tagSpans)
	b = binary.AppendUvarint(b, uint64(n))
	b = appendBytesField(b, tagTraceID, sp.TraceID[:])
	b = appendBytesField(b, tagSpanID, sp.SpanID[:])
	if sp.ParentID.IsValid() {
		b = appendBytesField(b, tagParentSpanID, sp.ParentID[:])
	}
	if sp.Name != "" {
		b = appendField(b, tagName, sp.Name)
	}
	b = append(b, tagKind, spanKindInternal)
	if start != 0 {
		b = appendFixed64(b, tagStart, start)
	}
	if end != 0 {
		b = appendFixed64(b, tagEnd, end)
	}
	for _, a := range e.attrs {
		b = appendKV(b, tagSpanAttrs, string(a.Key), a.Value.AsString())
	}
	for i := range sp.Logs {
		l := &sp.Logs[i]
		b = append(b, tagEvents)
		b = binary.AppendUvarint(b, uint64(eventSize(sp, l)))
		if t := eventTime(sp, l); t != 0 {
			b = appendFixed64(b, tagEventTime, t)
		}
		b = appendField(b, tagEventName, eventName(l))
		if l.Message != "" {
			b = appendKV(b, tagEventAttrs, AttrLogMessage, l.Message)
		}
		for _, a := range l.Attributes {
			b = appendKV(b, tagEventAttrs, a.Key, a.Value)
		}
	}
	b = append(b, tagStatus)
	b = binary.AppendUvarint(b, uint64(statusSize(sp)))
	if sp.Error {
		if m := statusMessage(sp); m != "" {
			b = appendField(b, tagStatusMessage, m)
		}
		b = append(b, tagStatusCode, statusCodeError)
	}
	b = binary.AppendUvarint(b, tagFlags)
	return binary.LittleEndian.AppendUint32(b, spanFlags)
}

// request returns the encoded ExportTraceServiceRequest of batch: one ResourceSpans per Source
// (in the order first seen), each with one ScopeSpans, as protoConverter.request.
func (e *wireEncoder) request(batch []*aggregator.Span) []byte {
	for i := range e.groups {
		e.groups[i].spans = e.groups[i].spans[:0]
	}
	groups := e.groups[:0]
	for _, sp := range batch {
		source := sp.Source
		if source == "" {
			source = defaultService
		}
		gi := -1
		for i := range groups {
			if groups[i].source == source {
				gi = i
				break
			}
		}
		if gi < 0 {
			if len(groups) < cap(groups) {
				groups = groups[:len(groups)+1]
				groups[len(groups)-1].source = source
			} else {
				groups = append(groups, wireGroup{source: source})
			}
			gi = len(groups) - 1
		}
		groups[gi].spans = e.appendSpan(groups[gi].spans, sp)
	}
	e.groups = groups
	total := 0
	scope := sizeField(len(scopeName))
	for _, g := range groups {
		rs := rsSize(g, scope)
		total += sizeField(rs)
	}
	out := make([]byte, 0, total)
	for _, g := range groups {
		res := sizeField(kvSize(AttrServiceName, g.source))
		ss := sizeField(scope) + len(g.spans)
		out = append(out, tagResourceSpans)
		out = binary.AppendUvarint(out, uint64(rsSize(g, scope)))
		out = append(out, tagResource)
		out = binary.AppendUvarint(out, uint64(res))
		out = appendKV(out, tagAttributes, AttrServiceName, g.source)
		out = append(out, tagScopeSpans)
		out = binary.AppendUvarint(out, uint64(ss))
		out = append(out, tagScope)
		out = binary.AppendUvarint(out, uint64(scope))
		out = appendField(out, tagScopeName, scopeName)
		out = append(out, g.spans...)
	}
	// A group's buffer that grew past what a batch usually needs is dropped.
	for i := range e.groups {
		if cap(e.groups[i].spans) > 8<<20 {
			e.groups[i].spans = nil
		}
	}
	return out
}

// rsSize is the size of the ResourceSpans message of g; scope is the size of the scope message.
func rsSize(g wireGroup, scope int) int {
	return sizeField(sizeField(kvSize(AttrServiceName, g.source))) + sizeField(sizeField(scope)+len(g.spans))
}

// exportMethod is the OTLP trace service's export method.
const exportMethod = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// rawRequest is an encoded request that rawCodec sends as it is.
type rawRequest []byte

// rawCodec sends a rawRequest's bytes and decodes the answer with protobuf-go. Its name is the
// proto codec's, so that the content type stays application/grpc+proto.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(rawRequest)
	if !ok {
		return nil, fmt.Errorf("otlpsink: raw codec cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(r)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("otlpsink: raw codec cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

// grpcUpload returns the function that sends an encoded request over conn with the headers
// and call options given; a partial success is an error worded as the exporters word it
// (see classify).
func grpcUpload(conn *grpc.ClientConn, headers map[string]string, opts ...grpc.CallOption) func(context.Context, []byte) error {
	var md metadata.MD
	if len(headers) > 0 {
		md = metadata.New(headers)
	}
	opts = append([]grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}, opts...)
	return func(ctx context.Context, req []byte) error {
		if md != nil {
			ctx = metadata.NewOutgoingContext(ctx, md)
		}
		var resp coltracepb.ExportTraceServiceResponse
		if err := conn.Invoke(ctx, exportMethod, rawRequest(req), &resp, opts...); err != nil {
			return err
		}
		if ps := resp.GetPartialSuccess(); ps != nil && (ps.GetRejectedSpans() > 0 || ps.GetErrorMessage() != "") {
			return errors.New(partialSuccessMessage(ps.GetErrorMessage(), ps.GetRejectedSpans()))
		}
		return nil
	}
}

// partialSuccessMessage is the OTLP exporters' error message for a partial success.
func partialSuccessMessage(msg string, rejected int64) string {
	return fmt.Sprintf("%s %s (%d spans rejected)", partialPrefix, msg, rejected)
}
