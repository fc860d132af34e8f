package storageapi_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/telemetry"
)

// startListener starts a Listener of cfg (on 127.0.0.1:0 unless set) over the rollout, with a
// meter read by the returned reader.
func startListener(t *testing.T, cfg storageapi.Config) (*storageapi.Listener, *sdkmetric.ManualReader) {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	tel := telemetry.Settings{Logger: slog.New(slog.DiscardHandler), MeterProvider: mp}
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{})
	l, err := storageapi.NewListener(cfg, storageapi.NewServer(e, tel), tel)
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	return l, reader
}

// listenerValue sums the points of the int64 metric name for the storageapi listener.
func listenerValue(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	return telemetrytest.Int64(t, reader, name, "listener", "storageapi")
}

func dial(t *testing.T, l *storageapi.Listener) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// nestedQuery is a search whose attribute value nests depth arrays.
func nestedQuery(depth int) *storagev2.TraceQueryParameters {
	v := &storagev2.AnyValue{Value: &storagev2.AnyValue_StringValue{StringValue: "x"}}
	for range depth {
		v = &storagev2.AnyValue{Value: &storagev2.AnyValue_ArrayValue{ArrayValue: &storagev2.ArrayValue{Values: []*storagev2.AnyValue{v}}}}
	}
	q := deploymentQuery("tracing")
	q.Attributes = append(q.Attributes, &storagev2.KeyValue{Key: "deep", Value: v})
	return q
}

// A request the server cannot decode is the client's error: InvalidArgument, for unary and
// streaming calls, not the Internal that gRPC answers for any codec error.
func TestUndecodableRequestIsInvalidArgument(t *testing.T) {
	l, _ := startListener(t, storageapi.Config{})
	conn := dial(t, l)
	c := storagev2.NewTraceReaderClient(conn)
	ctx := ctxT(t)

	// Nested deeper than protobuf's recursion limit (10,000).
	deep := &storagev2.FindTracesRequest{Query: nestedQuery(11_000)}
	_, err := c.FindTraceIDs(ctx, deep)
	assert.Equal(t, codes.InvalidArgument, code(err), "unary: %v", err)
	assert.Contains(t, err.Error(), "recursion")
	stream, err := c.FindTraces(ctx, deep)
	require.NoError(t, err)
	_, err = readAll(t, stream)
	assert.Equal(t, codes.InvalidArgument, code(err), "stream: %v", err)

	// Invalid UTF-8 in a string field (GetOperationsRequest.service is field 1, as
	// BytesValue.value is).
	err = conn.Invoke(ctx, "/jaeger.storage.v2.TraceReader/GetOperations", wrapperspb.Bytes([]byte{0xff, 0xfe}), &storagev2.GetOperationsResponse{})
	assert.Equal(t, codes.InvalidArgument, code(err), "invalid UTF-8: %v", err)

	// A nested query the decoder takes is answered as before.
	_, err = c.FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: nestedQuery(3)})
	assert.Equal(t, codes.InvalidArgument, code(err), "an array value cannot be searched: %v", err)
	ids, err := c.FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	assert.Len(t, ids.GetTraceIds(), 1)
}

// closedWithin reports whether the server closed (or reset) a new TCP connection within wait.
func closedWithin(t *testing.T, addr string, wait time.Duration) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNRESET) // reset while connecting
	}
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(wait)))
	_, err = io.ReadAll(c) // the server's settings frame, if any, then EOF when closed
	var ne net.Error
	return err == nil || !errors.As(err, &ne) || !ne.Timeout()
}

// The listener keeps at most maxConnections: one more is closed at once and counted.
func TestListenerConnectionLimit(t *testing.T) {
	l, reader := startListener(t, storageapi.Config{MaxConnections: 1})
	conn := dial(t, l)
	_, err := storagev2.NewTraceReaderClient(conn).GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), listenerValue(t, reader, "kelemetry.listener.connections"))

	assert.True(t, closedWithin(t, l.Addr().String(), 5*time.Second), "a second connection is closed at once")
	assert.Equal(t, int64(1), listenerValue(t, reader, "kelemetry.listener.refused_connections"))
	_, err = storagev2.NewTraceReaderClient(conn).GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err, "the first connection still serves")
}

// A connection without calls is closed after idleTimeout (the client reconnects for its next
// call); one that never sends its preface after handshakeTimeout, not gRPC's 120s.
func TestListenerIdleAndSilentConnectionsClosed(t *testing.T) {
	l, reader := startListener(t, storageapi.Config{IdleTimeout: 300 * time.Millisecond, HandshakeTimeout: 300 * time.Millisecond})
	start := time.Now()
	assert.True(t, closedWithin(t, l.Addr().String(), 5*time.Second), "a silent connection is closed")
	assert.Less(t, time.Since(start), 3*time.Second)

	conn := dial(t, l)
	c := storagev2.NewTraceReaderClient(conn)
	_, err := c.GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return listenerValue(t, reader, "kelemetry.listener.connections") == 0
	}, 5*time.Second, 20*time.Millisecond, "the idle connection is closed")
	require.Eventually(t, func() bool { return conn.GetState() == connectivity.Idle }, 5*time.Second, 20*time.Millisecond)
	_, err = c.GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err, "the client reconnects")
}

// Failed TLS handshakes are counted per listener.
func TestListenerCountsHandshakeErrors(t *testing.T) {
	dir := t.TempDir()
	files, err := httpservertest.WriteFiles(dir, "storage", "jaeger")
	require.NoError(t, err)
	l, reader := startListener(t, storageapi.Config{TLS: httpserver.TLSConfig{CertFile: files.ServerCert, KeyFile: files.ServerKey}})

	const n = 5
	for range n {
		_, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12})
		require.Error(t, err, "the client does not trust the certificate")
	}
	require.Eventually(t, func() bool {
		return listenerValue(t, reader, "kelemetry.listener.tls_handshake_errors") == n
	}, 5*time.Second, 20*time.Millisecond)

	caPEM, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	require.NoError(t, err)
	defer conn.Close()
	_, err = storagev2.NewTraceReaderClient(conn).GetServices(ctxT(t), &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(n), listenerValue(t, reader, "kelemetry.listener.tls_handshake_errors"))
}

func TestConfigDefaultsAndLimits(t *testing.T) {
	d := storageapi.Config{}.WithDefaults()
	assert.Equal(t, httpserver.DefaultMaxConnections, d.MaxConnections)
	assert.Equal(t, httpserver.DefaultIdleTimeout, d.IdleTimeout)
	assert.Equal(t, httpserver.DefaultReadHeaderTimeout, d.HandshakeTimeout)
	assert.Error(t, storageapi.Config{Addr: ":1", IdleTimeout: -time.Second}.Validate())
	assert.Error(t, storageapi.Config{Addr: ":1", HandshakeTimeout: -time.Second}.Validate())
}

// The storage API's counters are exported at 0 from the start: its listener's, its refusals by
// reason, and those of its bearer tokens when it checks them.
func TestCountersStartAtZero(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("secret-1\n"), 0o600))
	_, reader := startListener(t, storageapi.Config{TokenFiles: []string{tokens}})
	assert.Equal(t, telemetrytest.Zeros("reason", "concurrency", "memory"), telemetrytest.Points(t, reader, "kelemetry.storageapi.queries.rejected"))
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.storageapi.auth.rejected"))
	assert.Equal(t, telemetrytest.Zeros("listener", "storageapi"), telemetrytest.Points(t, reader, "kelemetry.listener.refused_connections"))
	assert.Equal(t, telemetrytest.Zeros("listener", "storageapi"), telemetrytest.Points(t, reader, "kelemetry.listener.tls_handshake_errors"))
}
