package pebble

import (
	"context"
	"testing"

	"github.com/kelemetry/kelemetry/store/internal/storetest"
	"github.com/stretchr/testify/require"
)

func BenchmarkPebbleExport(b *testing.B) {
	storetest.BenchmarkExport(b, openTestPebble(b, Config{}, nil))
}

func BenchmarkDecodeSpan(b *testing.B) {
	enc := appendSpan(nil, storetest.BenchSpans(0)[2])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSpan(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPebbleGetTrace(b *testing.B) {
	ctx := context.Background()
	p := openTestPebble(b, Config{}, nil)
	spans := storetest.BenchSpans(0)
	for i := range 20 {
		ev := *spans[2]
		ev.SpanID[0] = byte(i)
		spans = append(spans, &ev)
	}
	require.NoError(b, p.Export(ctx, spans))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.GetTrace(ctx, spans[0].TraceID); err != nil {
			b.Fatal(err)
		}
	}
}
