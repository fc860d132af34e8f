package otlpsink

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// received collects what an OTLP endpoint got.
type received struct {
	mu       sync.Mutex
	spans    map[trace.SpanID]receivedSpan
	services map[string]bool
	headers  []string
}

type receivedSpan struct {
	traceID  trace.TraceID
	parentID trace.SpanID
	start    uint64
	events   int
}

func (r *received) add(req *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spans == nil {
		r.spans, r.services = map[trace.SpanID]receivedSpan{}, map[string]bool{}
	}
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == AttrServiceName {
				r.services[kv.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				var rec receivedSpan
				var id trace.SpanID
				copy(id[:], sp.GetSpanId())
				copy(rec.traceID[:], sp.GetTraceId())
				copy(rec.parentID[:], sp.GetParentSpanId())
				rec.start = sp.GetStartTimeUnixNano()
				rec.events = len(sp.GetEvents())
				r.spans[id] = rec
			}
		}
	}
}

func (r *received) check(t *testing.T, sent []*aggregator.Span) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.spans, len(sent))
	for _, sp := range sent {
		got, ok := r.spans[sp.SpanID]
		if !assert.True(t, ok, "span %s arrived", sp.SpanID) {
			continue
		}
		assert.Equal(t, sp.TraceID, got.traceID)
		assert.Equal(t, sp.ParentID, got.parentID)
		assert.Equal(t, uint64(sp.Start.UnixNano()), got.start)
		assert.Equal(t, len(sp.Logs), got.events)
	}
	assert.Equal(t, map[string]bool{"object": true, "link": true, "audit": true}, r.services)
}

func TestHTTPEndpoint(t *testing.T) {
	ctx := context.Background()
	var got received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.add(&msg)
		got.mu.Lock()
		got.headers = append(got.headers, req.Header.Get("X-Tenant"))
		got.mu.Unlock()
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	defer srv.Close()

	m, mp := newMetrics()
	s, err := New(ctx, Config{
		Endpoint: srv.URL, Protocol: ProtocolHTTP, Compression: "gzip",
		Headers: map[string]string{"X-Tenant": "team-a"},
	}, telemetry.Settings{Logger: quiet, MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	sent := testSpans()
	require.NoError(t, s.Export(ctx, sent))
	require.NoError(t, s.Stop(ctx))

	got.check(t, sent)
	assert.Equal(t, []string{"team-a"}, got.headers)
	assert.Equal(t, int64(len(sent)), m.value(t, "kelemetry.otlp.spans.exported", ""))
}

type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	got     *received
	headers chan []string
}

func (c *collector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.got.add(req)
	md, _ := metadata.FromIncomingContext(ctx)
	select {
	case c.headers <- md.Get("x-tenant"):
	default:
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestGRPCEndpoint(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	col := &collector{got: &received{}, headers: make(chan []string, 1)}
	coltracepb.RegisterTraceServiceServer(srv, col)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	defer func() {
		srv.Stop()
		<-served
	}()

	s, err := New(ctx, Config{
		Endpoint: lis.Addr().String(), Insecure: true,
		Headers: map[string]string{"x-tenant": "team-b"},
	}, telemetry.Settings{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	sent := testSpans()
	require.NoError(t, s.Export(ctx, sent))
	require.NoError(t, s.Stop(ctx))

	col.got.check(t, sent)
	assert.Equal(t, []string{"team-b"}, <-col.headers)
}
