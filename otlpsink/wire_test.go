package otlpsink

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestWireEncoderMatchesProto: the request the wire encoder writes decodes, with protobuf-go,
// to the message protoConverter builds (which TestProtoConverterMatchesExporter compares with
// the SDK exporter's), and protobuf-go writes the same bytes for it.
func TestWireEncoderMatchesProto(t *testing.T) {
	spans := variedSpans()
	big := *spans[2]
	big.Name = strings.Repeat("n", 300)
	big.Logs = []aggregator.Log{{Type: "diff", Message: strings.Repeat("a long snapshot ", 2000), Attributes: aggregator.Attrs{{Key: "empty", Value: ""}}}}
	big.Attributes = append(aggregator.Attrs{{Key: "", Value: strings.Repeat("v", 200)}}, big.Attributes...)
	spans = append(spans, &big)
	spans = append(spans, manySpans(50)...)

	enc := &wireEncoder{}
	for round := range 3 { // buffers reused across requests
		batch := spans[round:]
		var got coltracepb.ExportTraceServiceRequest
		raw := enc.request(batch)
		require.NoError(t, proto.Unmarshal(raw, &got))
		want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: newProtoConverter().request(batch)}
		require.True(t, proto.Equal(want, &got), "round %d:\nwant %v\ngot  %v", round, want, &got)
		wb, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, wb, raw, "round %d: the bytes protobuf-go writes", round)
	}
	require.Empty(t, enc.request(nil))
	var empty coltracepb.ExportTraceServiceRequest
	require.NoError(t, proto.Unmarshal(enc.request(nil), &empty))
}

// partialCollector accepts every request and says it rejected one span of each; it records
// whether requests came gzip-compressed.
type partialCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	got *received
}

func (c *partialCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.got.add(req)
	return &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
		RejectedSpans: 1, ErrorMessage: "one span too old"}}, nil
}

// payloadSizes is a gRPC stats handler that counts the requests that arrived compressed.
type payloadSizes struct{ compressed atomic.Int64 }

func (*payloadSizes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (*payloadSizes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*payloadSizes) HandleConn(context.Context, stats.ConnStats)                       {}
func (p *payloadSizes) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok && in.CompressedLength > 0 && in.CompressedLength < in.Length {
		p.compressed.Add(1)
	}
}

// TestGRPCRawUploadGzipAndPartialSuccess: the sink's own gRPC requests go compressed when asked,
// arrive whole, and a partial success is counted as the exporters' is: the rejected spans
// dropped (reason rejected), the rest exported, nothing sent again.
func TestGRPCRawUploadGzipAndPartialSuccess(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sh := &payloadSizes{}
	srv := grpc.NewServer(grpc.StatsHandler(sh))
	col := &partialCollector{got: &received{}}
	coltracepb.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	reader := sdkmetric.NewManualReader()
	s, err := New(ctx, Config{Endpoint: lis.Addr().String(), Compression: "gzip"},
		telemetry.Settings{Logger: quiet, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	require.NotNil(t, s.uploadRaw, "a gRPC endpoint from the configuration: the sink's own encoder")
	require.NoError(t, s.Start(ctx))
	sent := testSpans()
	require.NoError(t, s.Export(ctx, sent))
	require.NoError(t, s.Stop(ctx))

	col.got.check(t, sent)
	assert.Positive(t, sh.compressed.Load(), "gzip-compressed requests")
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.otlp.spans.dropped", "reason", reasonRejected))
	assert.Equal(t, int64(len(sent)-1), telemetrytest.Int64(t, reader, "kelemetry.otlp.spans.exported", "", ""))
}
