package storageapi_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/telemetry"
)

// serveWith runs a Server over e on an in-memory gRPC connection with the server options.
func serveWith(t *testing.T, e *frontend.Engine, tel telemetry.Settings, opts ...grpc.ServerOption) clients {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	g := grpc.NewServer(opts...)
	storageapi.NewServer(e, tel).Register(g)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		<-served
	})
	return clients{storagev2.NewTraceReaderClient(conn), storagev2.NewDependencyReaderClient(conn)}
}

// While running queries hold the frontend's memory budget, every heavy storage request waits
// QueueWait and is refused with ResourceExhausted, counted with reason "memory", although turns
// are free.
func TestMemoryBudgetIsResourceExhausted(t *testing.T) {
	metrics := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{MaxMemoryBytes: 64 << 20, QueueWait: 10 * time.Millisecond})
	c := serveWith(t, e, telemetry.Settings{MeterProvider: mp})

	ctx, release, err := e.Admit(context.Background())
	require.NoError(t, err)
	require.True(t, e.Charge(ctx, 52<<20))

	_, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), "the query memory budget is in use")
	fs, err := c.traces.FindTraces(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	_, err = readAll(t, fs)
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	gs, err := c.traces.GetTraces(ctxT(t), &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: make([]byte, 16)}}})
	require.NoError(t, err)
	_, err = readAll(t, gs)
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)
	_, err = c.deps.GetDependencies(ctxT(t), &storagev2.GetDependenciesRequest{})
	assert.Equal(t, codes.ResourceExhausted, code(err), "%v", err)

	rejected := telemetrytest.Int64By(t, metrics, "kelemetry.storageapi.queries.rejected", "reason")
	assert.Equal(t, map[string]int64{"memory": 4}, rejected)

	release()
	_, err = c.traces.FindTraceIDs(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	assert.NoError(t, err)
}

// blockFirstSend holds the first message of every server stream until released.
type blockFirstSend struct {
	grpc.ServerStream
	sending chan<- struct{}
	release <-chan struct{}
	sent    bool
}

func (s *blockFirstSend) SendMsg(m any) error {
	if !s.sent {
		s.sent = true
		s.sending <- struct{}{}
		<-s.release
	}
	return s.ServerStream.SendMsg(m)
}

// FindTraces holds its turn (and the memory of its drawn result) until the last message is
// sent, not only while it searches: a slow reader of a large answer still counts.
func TestFindTracesHoldsItsTurnWhileStreaming(t *testing.T) {
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{MaxConcurrent: 1, QueueWait: 20 * time.Millisecond})
	sending, release := make(chan struct{}, 1), make(chan struct{})
	c := serveWith(t, e, telemetry.Settings{}, grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, &blockFirstSend{ServerStream: ss, sending: sending, release: release})
	}))

	done := make(chan error, 1)
	go func() {
		fs, err := c.traces.FindTraces(ctxT(t), &storagev2.FindTracesRequest{Query: deploymentQuery("tracing [full tree]")})
		if err == nil {
			var tds []*tracev1.TracesData
			tds, err = readAll(t, fs)
			if err == nil && len(tds) == 0 {
				err = status.Error(codes.NotFound, "no traces")
			}
		}
		done <- err
	}()
	<-sending // the search is done; its first message is being sent
	_, err := e.Acquire(context.Background())
	require.ErrorIs(t, err, query.ErrBusy, "the streaming search still holds its turn")
	close(release)
	require.NoError(t, <-done)
	rel, err := e.Acquire(context.Background())
	require.NoError(t, err, "given back once sent")
	rel()
}
