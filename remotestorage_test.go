package kelemetry_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
)

// remoteStorageAddr serves the ingested rollout's merged tree through jaeger.storage.v2.
func TestRemoteStorageAddrServesMergedTrees(t *testing.T) {
	cfg := localConfig(t.TempDir())
	cfg.RemoteStorageAddr = "127.0.0.1:0"
	var l *storageapi.Listener
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&l, &servers), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()
	require.NotNil(t, l)
	postRollout(t, servers.AuditAddr())
	require.Eventually(t, func() bool { return demoTraceFound(t, servers.APIAddr()) }, 10*time.Second, 50*time.Millisecond)

	assert.Greater(t, storageAPIFindDemo(t, l.Addr().String()), 1, "the Deployment with its ReplicaSets and Pods")
}

// storageAPIFindDemo checks the gRPC health of a jaeger.storage.v2 listener and returns the
// number of spans FindTraces streams for the rollout's Deployment with its related objects.
func storageAPIFindDemo(t *testing.T, addr string) int {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx := t.Context()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())

	tr := storagev2.NewTraceReaderClient(conn)
	str := func(k, v string) *storagev2.KeyValue {
		return &storagev2.KeyValue{Key: k, Value: &storagev2.AnyValue{Value: &storagev2.AnyValue_StringValue{StringValue: v}}}
	}
	stream, err := tr.FindTraces(ctx, &storagev2.FindTracesRequest{Query: &storagev2.TraceQueryParameters{
		ServiceName:  "tracing [full tree]",
		Attributes:   []*storagev2.KeyValue{str("resource", "deployments"), str("name", "demo")},
		StartTimeMin: timestamppb.New(time.Now().AddDate(-10, 0, 0)),
	}})
	require.NoError(t, err)
	spans := 0
	for {
		td, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		for _, rs := range td.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				spans += len(ss.GetSpans())
			}
		}
	}
	return spans
}

func TestRemoteStorageTakesAPISecurity(t *testing.T) {
	cfg := kelemetry.Config{RemoteStorageAddr: ":17271", HTTPTLS: httpserver.TLSConfig{CertFile: "c", KeyFile: "k"},
		HTTPAuth: httpserver.APIAuthConfig{TokenFiles: []string{"t"}}}
	rs := cfg.RemoteStorage()
	assert.Equal(t, ":17271", rs.Addr)
	assert.Equal(t, cfg.HTTPTLS, rs.TLS)
	assert.Equal(t, []string{"t"}, rs.TokenFiles)

	proxyOnly := kelemetry.Config{RemoteStorageAddr: ":17271", HTTPAuth: httpserver.APIAuthConfig{Proxy: httpserver.ProxyAuthConfig{ClientCAFile: "ca"}}}
	assert.ErrorContains(t, proxyOnly.Validate(), "remoteStorageAddr")
	assert.ErrorContains(t, kelemetry.Config{RemoteStorageAddr: "nohostport"}.Validate(), "storageapi")
}
