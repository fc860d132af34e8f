package otlpsink

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/aggregator"
)

// captureClient is an otlptrace.Client that keeps the requests it is given.
type captureClient struct{ got [][]*tracepb.ResourceSpans }

func (c *captureClient) Start(context.Context) error { return nil }
func (c *captureClient) Stop(context.Context) error  { return nil }
func (c *captureClient) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	c.got = append(c.got, rs)
	return nil
}

// bySource orders a request's resources by service name (the exporter's order is a map's).
func bySource(rs []*tracepb.ResourceSpans) []*tracepb.ResourceSpans {
	out := append([]*tracepb.ResourceSpans(nil), rs...)
	sort.Slice(out, func(i, j int) bool {
		return out[i].Resource.Attributes[0].Value.GetStringValue() < out[j].Resource.Attributes[0].Value.GetStringValue()
	})
	return out
}

// variedSpans are testSpans and variants of the event span: no source, parent or times, logs
// without a type or a message, an error span without an error log, and a few plain copies.
func variedSpans() []*aggregator.Span {
	spans := testSpans()
	extra := *spans[2]
	extra.Source, extra.ParentID, extra.Error = "", [8]byte{}, false
	extra.Start, extra.End = time.Time{}, time.Time{}
	extra.Logs = []aggregator.Log{{Type: aggregator.LogTypeError, Message: "m"}, {Attributes: aggregator.Attrs{{Key: "k", Value: "v"}}}}
	noErrLog := *spans[2]
	noErrLog.Logs = []aggregator.Log{{Type: "info", Message: "x"}}
	errNoMessage := *spans[2]
	errNoMessage.Logs = nil
	spans = append(spans, &extra, &noErrLog, &errNoMessage)
	return append(spans, manySpans(5)...)
}

// TestProtoConverterMatchesExporter: the requests the sink builds itself are the ones the SDK's
// OTLP exporter builds from converter.span's spans, field for field.
func TestProtoConverterMatchesExporter(t *testing.T) {
	spans := variedSpans()

	ctx := context.Background()
	capture := &captureClient{}
	exp, err := otlptrace.New(ctx, capture)
	require.NoError(t, err)
	conv := newConverter()
	sdk := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, sp := range spans {
		sdk[i] = conv.span(sp)
	}
	require.NoError(t, exp.ExportSpans(ctx, sdk))
	require.Len(t, capture.got, 1)
	want := bySource(capture.got[0])

	got := bySource(newProtoConverter().request(spans))
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "resource %d:\nwant %v\ngot  %v", i, want[i], got[i])
	}
	// Same bytes on the wire, too.
	wb, err := proto.MarshalOptions{Deterministic: true}.Marshal(&tracepb.TracesData{ResourceSpans: want})
	require.NoError(t, err)
	gb, err := proto.MarshalOptions{Deterministic: true}.Marshal(&tracepb.TracesData{ResourceSpans: got})
	require.NoError(t, err)
	require.Equal(t, wb, gb)
}
