package storageapi_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/telemetry"
)

// BenchmarkGetTracesDeploymentFullTree measures one GetTraces of the rollout's Deployment in
// "tracing [full tree]" (with its ReplicaSets and Pods), over an in-memory gRPC connection.
func BenchmarkGetTracesDeploymentFullTree(b *testing.B) {
	e := frontend.NewEngine(rollout(b), 0, frontend.Config{})
	ln := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	storageapi.NewServer(e, telemetry.Settings{}).Register(g)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ln) }()
	defer func() { g.Stop(); <-served }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	c := storagev2.NewTraceReaderClient(conn)
	ctx := context.Background()
	ids, err := c.FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: deploymentQuery("tracing [full tree]")})
	require.NoError(b, err)
	require.Len(b, ids.GetTraceIds(), 1)
	req := &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: ids.GetTraceIds()[0].GetTraceId()}}}
	spans := 0
	b.ReportAllocs()
	for b.Loop() {
		stream, err := c.GetTraces(ctx, req)
		require.NoError(b, err)
		n := 0
		for {
			td, err := stream.Recv()
			if err != nil {
				break
			}
			for _, rs := range td.GetResourceSpans() {
				for _, ss := range rs.GetScopeSpans() {
					n += len(ss.GetSpans())
				}
			}
		}
		spans = n
	}
	b.ReportMetric(float64(spans), "spans/op")
}
