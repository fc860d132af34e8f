package otlpsink_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/telemetry"
)

func Example() {
	ctx := context.Background()
	// otlpsink.New(ctx, otlpsink.Config{Endpoint: "collector:4317"}, telemetry.Settings{Logger: logger, MeterProvider: mp})
	// sends to a real endpoint; here an in-memory exporter stands in for it.
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	sink, err := otlpsink.NewWithExporter(otlpsink.Config{FlushInterval: time.Second}, exp, telemetry.Settings{})
	if err != nil {
		panic(err)
	}
	if err := sink.Start(ctx); err != nil {
		panic(err)
	}

	obj := aggregator.ObjectRef{Cluster: "prod", Resource: "pods", Namespace: "shop", Name: "web-0"}
	window := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tid := aggregator.TraceIDFor(obj.Key(), window)
	root := &aggregator.Span{
		TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindObject, Source: "object",
		Name: "pods/web-0", Object: obj, Window: window, Start: window, End: window.Add(30 * time.Minute),
	}
	if err := sink.Export(ctx, []*aggregator.Span{root}); err != nil {
		panic(err)
	}
	// Stop sends what is queued and shuts the exporter down.
	if err := sink.Stop(ctx); err != nil {
		panic(err)
	}
	got := exp.GetSpans()[0]
	fmt.Println(got.Name, got.SpanContext.TraceID() == tid, got.StartTime.Equal(window))
	// Output: pods/web-0 true true
}

// keptSpans is an in-memory exporter that keeps its spans when it is shut down (the plain one
// forgets them), so that they can be looked at after Stop.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }
