package otlpsink

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
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

// otlpHTTPHandler is an OTLP/HTTP receiver: protobuf POSTs on path, recorded in got.
func otlpHTTPHandler(got *received, path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != path || req.Method != http.MethodPost {
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
	})
}

func TestHTTPEndpoint(t *testing.T) {
	ctx := context.Background()
	var got received
	srv := httptest.NewServer(otlpHTTPHandler(&got, "/v1/traces"))
	defer srv.Close()
	m, mp := newMetrics()
	s, err := New(ctx, Config{
		Endpoint: srv.URL, Protocol: protocolHTTP, Compression: "gzip",
		Headers: map[string]string{"X-Tenant": "team-a"},
	}, telemetry.Settings{Logger: quiet, MeterProvider: mp})
	require.NoError(t, err)
	require.NotNil(t, s.uploadRaw, "an endpoint from the configuration: the sink's own encoder and client")
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

// count returns the number of distinct spans received.
func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

// testCerts writes a CA and a server certificate for 127.0.0.1 and returns the CA file and the
// server's TLS configuration.
func testCerts(t *testing.T) (caFile string, server *tls.Config) {
	t.Helper()
	f, err := httpservertest.WriteFiles(t.TempDir(), "otlp-test", "client")
	require.NoError(t, err)
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	require.NoError(t, err)
	return f.CA, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// grpcReceiver is an OTLP gRPC TraceService on lis, with TLS when tc is set.
type grpcReceiver struct {
	srv    *grpc.Server
	served chan struct{}
}

func startGRPCReceiver(t *testing.T, lis net.Listener, tc *tls.Config, got *received, opts ...grpc.ServerOption) *grpcReceiver {
	t.Helper()
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	r := &grpcReceiver{srv: grpc.NewServer(opts...), served: make(chan struct{})}
	coltracepb.RegisterTraceServiceServer(r.srv, &collector{got: got, headers: make(chan []string, 1)})
	go func() {
		defer close(r.served)
		_ = r.srv.Serve(lis)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *grpcReceiver) stop() {
	r.srv.Stop()
	<-r.served
}

// Every form of endpoint reaches a real OTLP receiver of the protocol and TLS the form implies,
// and everything sent arrives.
func TestEndpointForms(t *testing.T) {
	caFile, serverTLS := testCerts(t)
	ca := TLSConfig{CAFile: caFile}

	grpcAddr := func(t *testing.T, tc *tls.Config, got *received) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		startGRPCReceiver(t, lis, tc, got)
		return lis.Addr().String()
	}
	httpAddr := func(t *testing.T, tc *tls.Config, got *received, path string) string {
		srv := httptest.NewUnstartedServer(otlpHTTPHandler(got, path))
		if tc != nil {
			srv.TLS = tc
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, got *received) Config
	}{
		{"bare host:port is gRPC plaintext", func(t *testing.T, got *received) Config {
			return Config{Endpoint: grpcAddr(t, nil, got)}
		}},
		{"grpc:// is gRPC plaintext", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "grpc://" + grpcAddr(t, nil, got)}
		}},
		{"bare host:port with tls.enabled is gRPC TLS", func(t *testing.T, got *received) Config {
			return Config{Endpoint: grpcAddr(t, serverTLS, got), TLS: TLSConfig{Enabled: true, CAFile: caFile}}
		}},
		{"grpcs:// is gRPC TLS", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "grpcs://" + grpcAddr(t, serverTLS, got), TLS: ca}
		}},
		{"https:// with protocol grpc is gRPC TLS", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "https://" + grpcAddr(t, serverTLS, got), Protocol: protocolGRPC, TLS: ca}
		}},
		{"http:// with protocol grpc is gRPC plaintext", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "http://" + grpcAddr(t, nil, got), Protocol: protocolGRPC}
		}},
		{"http:// is OTLP/HTTP plaintext", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "http://" + httpAddr(t, nil, got, "/v1/traces")}
		}},
		{"http:// with a path posts there", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "http://" + httpAddr(t, nil, got, "/otlp/v1/traces") + "/otlp/v1/traces"}
		}},
		{"https:// is OTLP/HTTP TLS", func(t *testing.T, got *received) Config {
			return Config{Endpoint: "https://" + httpAddr(t, serverTLS, got, "/v1/traces"), TLS: ca}
		}},
		{"bare host:port with protocol http/protobuf is OTLP/HTTP plaintext", func(t *testing.T, got *received) Config {
			return Config{Endpoint: httpAddr(t, nil, got, "/v1/traces"), Protocol: protocolHTTP}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			got := &received{}
			cfg := tc.start(t, got)
			// Fail fast when the form dials the wrong way.
			cfg.MaxRetries, cfg.RetryBackoff, cfg.Timeout = 1, 10*time.Millisecond, 3*time.Second
			m, mp := newMetrics()
			s, err := New(ctx, cfg, telemetry.Settings{Logger: quiet, MeterProvider: mp})
			require.NoError(t, err)
			require.NoError(t, s.Start(ctx))
			sent := testSpans()
			require.NoError(t, s.Export(ctx, sent))
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			require.NoError(t, s.Stop(sctx))
			got.check(t, sent)
			assert.Equal(t, int64(len(sent)), m.value(t, "kelemetry.otlp.spans.exported", ""))
			assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
		})
	}
}

// The endpoint's form decides protocol, TLS and path; Protocol wins; what cannot be parsed fails
// Validate with a message naming the endpoint.
func TestEndpointTarget(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // target, or "error: " and a part of the message
	}{
		{Config{Endpoint: "collector:4317"}, "grpc://collector:4317"},
		{Config{Endpoint: "collector:4317", TLS: TLSConfig{Enabled: true}}, "grpc+tls://collector:4317"},
		{Config{Endpoint: "grpc://collector:4317"}, "grpc://collector:4317"},
		{Config{Endpoint: "grpcs://collector:4317"}, "grpc+tls://collector:4317"},
		{Config{Endpoint: "https://collector:4317"}, "grpc+tls://collector:4317"},
		{Config{Endpoint: "http://collector:4317"}, "grpc://collector:4317"},
		{Config{Endpoint: "https://collector:443", Protocol: "grpc"}, "grpc+tls://collector:443"},
		{Config{Endpoint: "http://collector:4318"}, "http://collector:4318/v1/traces"},
		{Config{Endpoint: "HTTPS://collector:4318/"}, "http+tls://collector:4318/v1/traces"},
		{Config{Endpoint: "https://otlp.example:443/api/traces"}, "http+tls://otlp.example:443/api/traces"},
		{Config{Endpoint: "collector:4318", Protocol: "http"}, "http://collector:4318/v1/traces"},
		{Config{Endpoint: "http://collector:4317", Protocol: "http/protobuf"}, "http://collector:4317/v1/traces"},
		{Config{Endpoint: "[::1]:4317"}, "grpc://[::1]:4317"},
		{Config{Endpoint: "collector"}, "error: want host:port"},
		{Config{Endpoint: "collector:otlp"}, "error: port"},
		{Config{Endpoint: "collector:0"}, "error: port"},
		{Config{Endpoint: ":4317"}, "error: no host"},
		{Config{Endpoint: "collector:4317/v1/traces"}, "error: want host:port or a URL"},
		{Config{Endpoint: "ftp://collector:21"}, "error: scheme \"ftp\""},
		{Config{Endpoint: "http://collector"}, "error: with a port"},
		{Config{Endpoint: "grpc://collector:4317/x"}, "error: no path"},
		{Config{Endpoint: "https://user:pw@collector:4318"}, "error: user info"},
		{Config{Endpoint: "grpcs://collector:4317", Insecure: true}, "error: insecure"},
		{Config{Endpoint: "collector:4317", Protocol: "thrift"}, "error: protocol"},
	} {
		err := tc.cfg.Validate()
		if msg, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if assert.Error(t, err, tc.cfg.Endpoint) {
				assert.Contains(t, err.Error(), msg, tc.cfg.Endpoint)
				if tc.cfg.Endpoint != "" && !strings.Contains(msg, "protocol") {
					assert.Contains(t, err.Error(), tc.cfg.Endpoint)
				}
			}
			continue
		}
		require.NoError(t, err, tc.cfg.Endpoint)
		got, err := tc.cfg.target()
		require.NoError(t, err)
		assert.Equal(t, tc.want, got.String(), tc.cfg.Endpoint)
	}
}

// sendAll exports spans two at a time as the audit consumer does: a refusal (ErrSinkBusy) is
// retried after a pause. It returns the number of refusals and whether Health reported busy.
func sendAll(t *testing.T, s *Sink, spans []*aggregator.Span, onBusy func()) (refusals int, busySeen bool) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < len(spans); i += 2 {
		for {
			if err := s.Health(ctx); err != nil {
				require.ErrorIs(t, err, aggregator.ErrSinkBusy)
				busySeen = true
			}
			err := s.Export(ctx, spans[i:min(i+2, len(spans))])
			if err == nil {
				break
			}
			require.ErrorIs(t, err, aggregator.ErrSinkBusy)
			refusals++
			if onBusy != nil {
				onBusy()
				onBusy = nil
			}
			require.True(t, time.Now().Before(deadline), "the sink stays busy")
			time.Sleep(5 * time.Millisecond) // the consumer's pause before a retry, as in audit (not a wait)
		}
	}
	return refusals, busySeen
}

// The receiver is down for a while, then comes back: meanwhile the queue fills and the sink
// reports itself busy (the webhook would answer 429) and refuses what does not fit (the consumer
// retries); afterwards every span arrives and none is dropped.
func TestReceiverDownThenBack(t *testing.T) {
	for _, protocol := range []string{protocolGRPC, protocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			ctx := context.Background()
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			addr := lis.Addr().String()
			require.NoError(t, lis.Close()) // down

			got := &received{}
			m, mp := newMetrics()
			s, err := New(ctx, Config{
				Endpoint: addr, Protocol: protocol, QueueSize: 20, BatchSize: 5, FlushInterval: 5 * time.Millisecond,
				RetryBackoff: 20 * time.Millisecond, Timeout: time.Second, EnqueueTimeout: 5 * time.Millisecond,
			}, telemetry.Settings{Logger: quiet, MeterProvider: mp})
			require.NoError(t, err)
			require.NoError(t, s.Start(ctx))

			spans := manySpans(200)
			up := func() {
				// Down a while longer: until a few retries have failed.
				require.Eventually(t, func() bool { return m.value(t, "kelemetry.otlp.export.failures", "") >= 3 },
					10*time.Second, 5*time.Millisecond, "sends to a receiver that is down fail")
				lis, err := net.Listen("tcp", addr)
				require.NoError(t, err)
				if protocol == protocolGRPC {
					startGRPCReceiver(t, lis, nil, got)
					return
				}
				srv := &http.Server{Handler: otlpHTTPHandler(got, "/v1/traces"), ReadHeaderTimeout: time.Second}
				served := make(chan struct{})
				go func() {
					defer close(served)
					_ = srv.Serve(lis)
				}()
				t.Cleanup(func() {
					_ = srv.Close()
					<-served
				})
			}
			refusals, busy := sendAll(t, s, spans, up)
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			require.NoError(t, s.Stop(sctx))

			assert.Positive(t, refusals, "the full queue refused")
			assert.True(t, busy, "the sink reported busy")
			assert.Equal(t, len(spans), got.count(), "every span arrived")
			assert.Equal(t, int64(len(spans)), m.value(t, "kelemetry.otlp.spans.exported", ""))
			assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.dropped", ""))
			assert.Equal(t, int64(refusals*2), m.value(t, "kelemetry.otlp.spans.refused", ""))
			assert.Positive(t, m.value(t, "kelemetry.otlp.export.failures", ""))
		})
	}
}

// With dropWhenFull, a receiver that is down makes the full queue drop spans: every one of them
// counted, and every other one arrives once the receiver is back.
func TestReceiverDownDropWhenFull(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())

	got := &received{}
	m, mp := newMetrics()
	s, err := New(ctx, Config{
		Endpoint: addr, QueueSize: 10, BatchSize: 5, FlushInterval: 5 * time.Millisecond, DropWhenFull: true,
		RetryBackoff: 20 * time.Millisecond, Timeout: time.Second, EnqueueTimeout: -1,
	}, telemetry.Settings{Logger: quiet, MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	spans := manySpans(50)
	failed := 0
	for i := 0; i < len(spans); i += 2 {
		require.NoError(t, s.Health(ctx), "a sink that drops is never busy")
		if err := s.Export(ctx, spans[i:i+2]); err != nil {
			require.ErrorIs(t, err, errQueueFull)
			require.False(t, errors.Is(err, aggregator.ErrSinkBusy), "not to be retried")
			failed += 2
		}
	}
	require.Positive(t, failed)
	lis, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	startGRPCReceiver(t, lis, nil, got)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(sctx))

	dropped := m.value(t, "kelemetry.otlp.spans.dropped", reasonQueueFull)
	assert.Equal(t, int64(failed), dropped)
	assert.Equal(t, int64(0), m.value(t, "kelemetry.otlp.spans.refused", ""))
	assert.Equal(t, len(spans)-failed, got.count(), "the rest arrived")
	assert.Equal(t, fmt.Sprint(len(spans)-failed), fmt.Sprint(m.value(t, "kelemetry.otlp.spans.exported", "")))
}

// A receiver with a small request size limit: batches it refuses as too large are split until
// they pass, and only a span too large on its own is dropped, counted as rejected. Before, the
// refused batch was retried forever and the queue filled.
func TestOversizeRequestsAreSplit(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	got := &received{}
	startGRPCReceiver(t, lis, nil, got, grpc.MaxRecvMsgSize(64<<10))
	m, mp := newMetrics()
	s, err := New(ctx, Config{Endpoint: lis.Addr().String(), MaxBatchBytes: 10 << 20, RetryBackoff: 10 * time.Millisecond},
		telemetry.Settings{Logger: quiet, MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	spans := manySpans(41)
	for i, sp := range spans {
		size := 8 << 10
		if i == 40 {
			size = 100 << 10 // larger than the receiver takes in one request
		}
		sp.Attributes = aggregator.Attrs{{Key: "payload", Value: strings.Repeat("x", size)}}
	}
	require.NoError(t, s.Export(ctx, spans))
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(stopCtx))
	assert.Equal(t, 40, got.count())
	assert.Equal(t, int64(40), m.value(t, "kelemetry.otlp.spans.exported", ""))
	assert.Equal(t, int64(1), m.value(t, "kelemetry.otlp.spans.dropped", "rejected"))
}

// Requests are bounded by MaxBatchBytes as well as BatchSize.
func TestBatchesByBytes(t *testing.T) {
	exp := &recorder{}
	s := newSink(t, Config{BatchSize: 100, MaxBatchBytes: 20 << 10, FlushInterval: time.Hour}, exp, nil)
	require.NoError(t, s.Start(context.Background()))
	spans := manySpans(10)
	for _, sp := range spans {
		sp.Attributes = aggregator.Attrs{{Key: "payload", Value: strings.Repeat("x", 4<<10)}}
	}
	require.NoError(t, s.Export(context.Background(), spans))
	require.NoError(t, s.Stop(context.Background()))
	batches, _, _ := exp.state()
	assert.Equal(t, []int{4, 4, 2}, batches, "about 4.5 KiB each: four fit in 20 KiB")
}
