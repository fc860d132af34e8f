package otlpsink

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Attribute keys the sink adds besides those in package aggregator.
const (
	// AttrSpanKind is the aggregator.SpanKind: object, link or event.
	AttrSpanKind = "kelemetry.span.kind"
	// AttrServiceName is the resource attribute that holds Span.Source.
	AttrServiceName = "service.name"
	// AttrLogMessage holds Log.Message on span events.
	AttrLogMessage = "message"
)

const (
	scopeName        = "github.com/kelemetry/kelemetry"
	defaultService   = "kelemetry"
	defaultEventName = "log"
	maxResources     = 256
)

// converter turns aggregator spans into SDK spans. It is used by one goroutine at a time.
type converter struct {
	resources map[string]*resource.Resource
	scope     instrumentation.Scope
}

func newConverter() *converter {
	return &converter{resources: map[string]*resource.Resource{}, scope: instrumentation.Scope{Name: scopeName}}
}

// resource returns the resource of a service, one per Source, so the exporter groups spans by it.
func (c *converter) resource(source string) *resource.Resource {
	if source == "" {
		source = defaultService
	}
	if r, ok := c.resources[source]; ok {
		return r
	}
	r := resource.NewSchemaless(attribute.String(AttrServiceName, source))
	if len(c.resources) < maxResources {
		c.resources[source] = r
	}
	return r
}

// span converts sp. The object reference becomes k8s.* and kelemetry.object.* attributes, a link
// kelemetry.link.* attributes; the span's own attributes follow and win over those. Logs become
// span events named after the log type, with the message in the "message" attribute; a log
// without a time gets the span's start. Error sets the status to Error, described by the first
// error log.
func (c *converter) span(sp *aggregator.Span) sdktrace.ReadOnlySpan {
	flags := trace.TraceFlags(0).WithSampled(true)
	stub := tracetest.SpanStub{
		Name: sp.Name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: sp.TraceID, SpanID: sp.SpanID, TraceFlags: flags,
		}),
		SpanKind:             trace.SpanKindInternal,
		StartTime:            sp.Start,
		EndTime:              sp.End,
		Attributes:           attributes(sp),
		Resource:             c.resource(sp.Source),
		InstrumentationScope: c.scope,
	}
	if sp.ParentID.IsValid() {
		stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: sp.TraceID, SpanID: sp.ParentID, TraceFlags: flags,
		})
	}
	if len(sp.Logs) > 0 {
		stub.Events = make([]sdktrace.Event, len(sp.Logs))
		for i := range sp.Logs {
			l := &sp.Logs[i]
			ev := sdktrace.Event{Name: l.Type, Time: l.Time}
			if ev.Name == "" {
				ev.Name = defaultEventName
			}
			if ev.Time.IsZero() {
				ev.Time = sp.Start
			}
			ev.Attributes = make([]attribute.KeyValue, 0, len(l.Attributes)+1)
			if l.Message != "" {
				ev.Attributes = append(ev.Attributes, attribute.String(AttrLogMessage, l.Message))
			}
			ev.Attributes = appendAttrs(ev.Attributes, 0, l.Attributes)
			stub.Events[i] = ev
		}
	}
	if sp.Error {
		stub.Status = sdktrace.Status{Code: codes.Error}
		for i := range sp.Logs {
			if sp.Logs[i].Type == aggregator.LogTypeError {
				stub.Status.Description = sp.Logs[i].Message
				break
			}
		}
	}
	return stub.Snapshot()
}

func attributes(sp *aggregator.Span) []attribute.KeyValue {
	return appendSpanAttributes(make([]attribute.KeyValue, 0, 16+len(sp.Attributes)), sp)
}

// appendSpanAttributes appends the attributes of sp to attrs, which must be empty (its room is
// reused).
func appendSpanAttributes(attrs []attribute.KeyValue, sp *aggregator.Span) []attribute.KeyValue {
	o := &sp.Object
	attrs = append(attrs,
		attribute.String(AttrSpanKind, string(sp.Kind)),
		attribute.String(aggregator.AttrCluster, o.Cluster),
		attribute.String(aggregator.AttrGroup, o.Group),
		attribute.String(aggregator.AttrResource, o.Resource),
		attribute.String(aggregator.AttrName, o.Name),
	)
	attrs = appendNonEmpty(attrs, aggregator.AttrNamespace, o.Namespace)
	attrs = appendNonEmpty(attrs, aggregator.AttrVersion, o.Version)
	attrs = appendNonEmpty(attrs, aggregator.AttrUID, o.UID)
	if l := sp.Link; l != nil {
		attrs = append(attrs,
			attribute.String(aggregator.AttrLinkCluster, l.Target.Cluster),
			attribute.String(aggregator.AttrLinkGroup, l.Target.Group),
			attribute.String(aggregator.AttrLinkResource, l.Target.Resource),
			attribute.String(aggregator.AttrLinkName, l.Target.Name),
			attribute.String(aggregator.AttrLinkRole, string(l.Role)),
		)
		attrs = appendNonEmpty(attrs, aggregator.AttrLinkNamespace, l.Target.Namespace)
		attrs = appendNonEmpty(attrs, aggregator.AttrLinkClass, l.Class)
	}
	return appendAttrs(attrs, len(attrs), sp.Attributes)
}

func appendNonEmpty(attrs []attribute.KeyValue, key, value string) []attribute.KeyValue {
	if value == "" {
		return attrs
	}
	return append(attrs, attribute.String(key, value))
}

// appendAttrs appends src to dst; a key already among the first fixed entries of dst is
// replaced instead, so no key appears twice.
func appendAttrs(dst []attribute.KeyValue, fixed int, src aggregator.Attrs) []attribute.KeyValue {
next:
	for _, a := range src {
		for i := range dst[:fixed] {
			if string(dst[i].Key) == a.Key {
				dst[i].Value = attribute.StringValue(a.Value)
				continue next
			}
		}
		dst = append(dst, attribute.String(a.Key, a.Value))
	}
	return dst
}
