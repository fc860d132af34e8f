package storageapi_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/httpservertest"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// With TLS and token files, calls need TLS and a bearer token; health checks need no token.
func TestTLSAndBearerToken(t *testing.T) {
	dir := t.TempDir()
	files, err := httpservertest.WriteFiles(dir, "storage", "jaeger")
	require.NoError(t, err)
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("# jaeger\nsecret-1\n"), 0o600))

	var l *storageapi.Listener
	app := fxtest.New(t,
		fx.Supply(fx.Annotate(rollout(t), fx.As(new(store.Reader)))),
		fx.Supply(storageapi.Config{Addr: "127.0.0.1:0", TLS: httpserver.TLSConfig{CertFile: files.ServerCert, KeyFile: files.ServerKey},
			TokenFiles: []string{tokens}}),
		frontend.Module, storageapi.Module, fx.Populate(&l),
	)
	app.RequireStart()
	defer app.RequireStop()

	caPEM, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
	require.NoError(t, err)
	defer conn.Close()
	ctx := ctxT(t)

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err, "probes need no token")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())

	c := storagev2.NewTraceReaderClient(conn)
	_, err = c.GetServices(ctx, &storagev2.GetServicesRequest{})
	assert.Equal(t, codes.Unauthenticated, code(err), "no token: %v", err)
	_, err = c.GetServices(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), &storagev2.GetServicesRequest{})
	assert.Equal(t, codes.Unauthenticated, code(err), "unknown token: %v", err)
	stream, err := c.FindTraces(ctx, &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	_, err = readAll(t, stream)
	assert.Equal(t, codes.Unauthenticated, code(err), "streams too: %v", err)

	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer secret-1")
	svc, err := c.GetServices(authed, &storagev2.GetServicesRequest{})
	require.NoError(t, err)
	assert.NotEmpty(t, svc.GetServices())
	ids, err := c.FindTraceIDs(authed, &storagev2.FindTracesRequest{Query: deploymentQuery("tracing")})
	require.NoError(t, err)
	assert.Len(t, ids.GetTraceIds(), 1)
}

func TestListenerBadTokenFile(t *testing.T) {
	e := frontend.NewEngine(rollout(t), 0, frontend.Config{})
	_, err := storageapi.NewListener(storageapi.Config{Addr: "127.0.0.1:0", TokenFiles: []string{filepath.Join(t.TempDir(), "missing")}},
		storageapi.NewServer(e, telemetry.Settings{}), telemetry.Settings{})
	assert.Error(t, err)
}
