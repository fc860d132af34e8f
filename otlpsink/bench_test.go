package otlpsink

import (
	"context"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func BenchmarkConvert(b *testing.B) {
	c := newConverter()
	sp := testSpans()[2]
	b.ReportAllocs()
	for b.Loop() {
		_ = c.span(sp)
	}
}

// BenchmarkSinkExport measures Export of batches of 3 spans through the queue and the worker
// (conversion included) to an exporter that discards them.
func BenchmarkSinkExport(b *testing.B) {
	ctx := context.Background()
	s, err := NewWithExporter(Config{EnqueueTimeout: time.Minute}, discard{}, telemetry.Settings{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		b.Fatal(err)
	}
	spans := testSpans()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Export(ctx, spans); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}
