package storageapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The module serves the storage API, health and reflection on a real TCP listener.
func TestModuleServesOverTCP(t *testing.T) {
	var l *storageapi.Listener
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(rollout(t), fx.As(new(store.Reader)))),
		fx.Supply(storageapi.Config{Addr: "127.0.0.1:0"}),
		frontend.Module,
		storageapi.Module,
		fx.Populate(&l),
	)
	app.RequireStart()
	defer app.RequireStop()
	require.NotNil(t, l)
	require.NotNil(t, l.Addr())

	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx := ctxT(t)

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())

	rs, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, rs.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	resp, err := rs.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	assert.Contains(t, names, "jaeger.storage.v2.TraceReader")
	assert.Contains(t, names, "jaeger.storage.v2.DependencyReader")
	assert.Contains(t, names, "grpc.health.v1.Health")
	// Reflection resolves the service with the real OTLP messages (grpcurl needs no protos).
	require.NoError(t, rs.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "jaeger.storage.v2.TraceReader"}}))
	resp, err = rs.Recv()
	require.NoError(t, err)
	assert.NotEmpty(t, resp.GetFileDescriptorResponse().GetFileDescriptorProto())
	require.NoError(t, rs.CloseSend())

	svc, err := storagev2.NewTraceReaderClient(conn).GetServices(ctx, &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	assert.True(t, slices.Contains(svc.GetServices(), "tracing [full tree]"))
	ids, err := storagev2.NewTraceReaderClient(conn).FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	assert.Len(t, ids.GetTraceIds(), 1)
}

// Without an address the module serves nothing.
func TestModuleOffWithoutAddr(t *testing.T) {
	var l *storageapi.Listener
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(rollout(t), fx.As(new(store.Reader)))),
		frontend.Module,
		storageapi.Module,
		fx.Populate(&l),
	)
	app.RequireStart()
	app.RequireStop()
	assert.Nil(t, l)
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, storageapi.Config{}.Validate())
	assert.NoError(t, storageapi.Config{Addr: ":17271"}.Validate())
	assert.Error(t, storageapi.Config{Addr: "17271"}.Validate())
}

// Stop is safe without Start.
func TestListenerStopWithoutStart(t *testing.T) {
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{})
	l, err := storageapi.NewListener(storageapi.Config{Addr: "127.0.0.1:0"}, storageapi.NewServer(e, telemetry.Settings{}), telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, l.Stop(context.Background()))
}
