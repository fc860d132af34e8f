package remotelinker

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// natsServer starts an embedded nats-server on a loopback port and returns its URL.
func natsServer(t testing.TB) string {
	t.Helper()
	return natstest.Start(t, nil).URL()
}

// natsServerWith is natsServer with options changed by edit.
func natsServerWith(t testing.TB, edit func(*server.Options)) string {
	t.Helper()
	return natstest.Start(t, edit).URL()
}

func connect(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// metrics returns settings that record into a manual reader.
func metrics() (telemetry.Settings, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	return telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}, r
}

func startWorker(t testing.TB, nc *nats.Conn, l aggregator.Linker, cfg WorkerConfig, tel telemetry.Settings) *worker {
	t.Helper()
	w, err := newWorker(nc, l, cfg, tel)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// funcLinker is a linker made of a function, counting its calls.
type funcLinker struct {
	name  string
	fn    func(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error)
	calls atomic.Int64
}

func (l *funcLinker) Name() string { return l.name }
func (l *funcLinker) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	l.calls.Add(1)
	return l.fn(ctx, obj)
}

// stuck is a Lookup that waits for its context (a worker that never answers in time).
func stuck(ctx context.Context, _ aggregator.Object) ([]aggregator.Link, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

var (
	pod = aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "default", Name: "web-1"}
	cm  = aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "settings"}
)
