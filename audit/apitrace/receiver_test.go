package apitrace

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
	"github.com/kelemetry/kelemetry/internal/otlpin"
)

// serve runs the receiver of h on an OTLP listener and returns its address.
func serve(t *testing.T, h *harness, cfg httpserver.Config, dump string) string {
	t.Helper()
	d, err := newDumper(dump, 1<<20, h.j.log)
	require.NoError(t, err)
	cfg.OTLPAddr = "127.0.0.1:0"
	srv, err := httpserver.New(cfg, httpserver.Deps{OTLP: []httpserver.Handler{newReceiver(h.j, d)}})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()); _ = d.close() })
	return srv.OTLPAddr()
}

// sendWithSDK traces a request with the OpenTelemetry SDK, as kube-apiserver does, and exports it.
func sendWithSDK(t *testing.T, exp sdktrace.SpanExporter, auditID string) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "apiserver"))))
	tr := tp.Tracer("k8s.io/apiserver")
	ctx, root := tr.Start(context.Background(), "PUT /apis/apps/v1/namespaces/{:namespace}/deployments/{:name}",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("audit-id", auditID), attribute.String("http.method", "PUT")))
	ctx, h := tr.Start(ctx, "Update", trace.WithAttributes(attribute.String("audit-id", auditID), attribute.String("verb", "PUT")))
	_, w := tr.Start(ctx, "Call mutating webhook", trace.WithAttributes(attribute.String("webhook", "defaults.example.com")))
	time.Sleep(20 * time.Millisecond)
	w.End()
	_, e := tr.Start(ctx, "GuaranteedUpdate etcd3", trace.WithAttributes(attribute.String("audit-id", auditID), attribute.String("key", "/deployments/default/web")))
	e.End()
	h.End()
	root.End()
	require.NoError(t, tp.Shutdown(context.Background()))
}

func TestReceiverProtocols(t *testing.T) {
	for _, tc := range []struct {
		name string
		exp  func(ctx context.Context, addr string) (sdktrace.SpanExporter, error)
	}{
		{"grpc", func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
			// kube-apiserver's exporter: OTLP/gRPC without TLS.
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure())
		}},
		{"http-protobuf-gzip", func(ctx context.Context, addr string) (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			dump := filepath.Join(t.TempDir(), "dump.jsonl")
			addr := serve(t, h, httpserver.Config{}, dump)
			exp, err := tc.exp(t.Context(), addr)
			require.NoError(t, err)
			sendWithSDK(t, exp, "b-1")
			ev := auditEvent("b-1", "web", time.Now())
			ev.Object.Resource = "deployments"
			require.NoError(t, h.e.Send(t.Context(), ev))
			got := h.requestTrees(t)
			assert.Contains(t, got, "web > PUT /apis/apps/v1/namespaces/{:namespace}/deployments/{:name} > Update > Call mutating webhook")
			assert.Contains(t, got, "web > PUT /apis/apps/v1/namespaces/{:namespace}/deployments/{:name} > Update > GuaranteedUpdate etcd3")

			// The dump replays into the same spans.
			again := newHarness(t, Config{})
			n, err := replay(t.Context(), again.j, dump)
			require.NoError(t, err)
			assert.Equal(t, 4, n)
			require.NoError(t, again.e.Send(t.Context(), ev))
			assert.Equal(t, got, again.requestTrees(t))
		})
	}
}

func TestReceiverHTTPAnswers(t *testing.T) {
	h := newHarness(t, Config{MaxPendingBytes: 1500, MaxRequestBytes: 4096})
	addr := serve(t, h, httpserver.Config{}, "")
	post := func(body []byte, ct string) (int, http.Header) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	code, _ := post([]byte("{not json"), "application/json")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = post([]byte{0xff, 0x01}, "application/x-protobuf")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = post(make([]byte, 5000), "application/x-protobuf")
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)

	body, err := otlpin.MarshalJSON(exportRequest(apiserverRequest(1, "c-1", "POST", t0, time.Millisecond)...))
	require.NoError(t, err)
	code, _ = post(body, "application/json")
	assert.Equal(t, http.StatusOK, code)
	pb, err := proto.Marshal(exportRequest(apiserverRequest(2, "c-2", "POST", t0, time.Millisecond)...))
	require.NoError(t, err)
	code, header := post(pb, "application/x-protobuf")
	assert.Equal(t, http.StatusTooManyRequests, code, "the spans waiting are at their limit")
	assert.Equal(t, "1", header.Get("Retry-After"))

	// The JSON request was read with its hex IDs.
	rs, _ := spansOf(mustJSON(t, body))
	require.Len(t, rs, 5)
	assert.Equal(t, "0000000000000065", rs[0].idHex())
}

func mustJSON(t *testing.T, b []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	req := &coltracepb.ExportTraceServiceRequest{}
	require.NoError(t, otlpin.UnmarshalJSON(b, req))
	return req
}

func TestReceiverGRPCFull(t *testing.T) {
	h := newHarness(t, Config{MaxPendingBytes: 100})
	h.accept(t, apiserverRequest(1, "d-1", "POST", t0, time.Millisecond)...)
	addr := serve(t, h, httpserver.Config{}, "")
	exp, err := otlptracegrpc.New(t.Context(), otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	require.NoError(t, err)
	err = exp.ExportSpans(t.Context(), oneSpan("d-2"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ResourceExhausted")
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestReceiverAuth(t *testing.T) {
	h := newHarness(t, Config{})
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("s3cret\n"), 0o600))
	addr := serve(t, h, httpserver.Config{OTLPAuth: httpserver.AuditAuthConfig{TokenFiles: []string{tokens}}}, "")
	for _, tc := range []struct {
		token string
		ok    bool
	}{{"", false}, {"wrong", false}, {"s3cret", true}} {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if tc.token != "" {
			opts = append(opts, otlptracegrpc.WithHeaders(map[string]string{"authorization": "Bearer " + tc.token}))
		}
		exp, err := otlptracegrpc.New(t.Context(), opts...)
		require.NoError(t, err)
		err = exp.ExportSpans(t.Context(), oneSpan("e-1"))
		if tc.ok {
			assert.NoError(t, err)
		} else {
			require.Error(t, err, "token %q", tc.token)
			assert.Contains(t, err.Error(), "Unauthenticated")
		}
		_ = exp.Shutdown(context.Background())
	}
}

// oneSpan is an ended span carrying auditID, as an exporter takes it.
func oneSpan(auditID string) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, sp := tp.Tracer("t").Start(context.Background(), "x", trace.WithAttributes(attribute.String("audit-id", auditID)))
	sp.End()
	return rec.Ended()
}

// TestReceiverTLSClientCert: with otlpTLS and a client CA, OTLP/gRPC runs over TLS (HTTP/2 by
// ALPN) and only a client certificate of that CA gets in.
func TestReceiverTLSClientCert(t *testing.T) {
	h := newHarness(t, Config{})
	f, err := httpservertest.WriteFiles(t.TempDir(), "otlp", "kube-apiserver")
	require.NoError(t, err)
	addr := serve(t, h, httpserver.Config{
		OTLPTLS:  httpserver.TLSConfig{CertFile: f.ServerCert, KeyFile: f.ServerKey},
		OTLPAuth: httpserver.AuditAuthConfig{ClientCAFile: f.CA},
	}, "")
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(f.CA)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	export := func(certs []tls.Certificate) error {
		exp, err := otlptracegrpc.New(t.Context(), otlptracegrpc.WithEndpoint(addr),
			otlptracegrpc.WithTLSCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12})),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
		require.NoError(t, err)
		defer func() { _ = exp.Shutdown(context.Background()) }()
		return exp.ExportSpans(t.Context(), oneSpan("f-1"))
	}
	err = export(nil)
	require.Error(t, err, "no client certificate")
	assert.Contains(t, err.Error(), "Unauthenticated")
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	require.NoError(t, err)
	require.NoError(t, export([]tls.Certificate{cert}))
}
