package event

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestModuleReplay(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	var r *Replayer
	var src *source
	app := fxtest.New(t,
		fx.Supply(Config{Cluster: "kind", Replay: []string{fixture("rollout", "events-core-v1.json")}}),
		fx.Provide(func() aggregator.Aggregator { return agg }),
		Module,
		fx.Populate(&r, &src),
	)
	app.RequireStart()
	select {
	case <-r.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("replay did not finish")
	}
	stats, err := r.Status()
	require.NoError(t, err)
	require.Len(t, stats, 1)
	assert.Equal(t, 30, stats[0].Stats.Sent)
	assert.True(t, stats[0].Done)
	assert.Nil(t, src)
	app.RequireStop()
	assert.Len(t, agg.Events(), 30)
}

func TestModuleWatchNeedsClusters(t *testing.T) {
	err := fx.ValidateApp(
		fx.Supply(Config{Watch: true}),
		fx.Provide(func() aggregator.Aggregator { return &aggregatortest.RecordingAggregator{} }),
		Module,
		fx.Invoke(func(*source) {}),
	)
	require.NoError(t, err, "the graph is valid")
	app := fx.New(
		fx.Supply(Config{Watch: true}),
		fx.Provide(func() aggregator.Aggregator { return &aggregatortest.RecordingAggregator{} }),
		Module,
		fx.Invoke(func(*source) {}),
		fx.NopLogger,
	)
	assert.ErrorContains(t, app.Err(), "kubeconfig")
	_ = context.Background()
}

type fakeClusters map[string]dynamic.Interface

func (f fakeClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	if d, ok := f[cluster]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%s: %w", cluster, kube.ErrUnknownCluster)
}

// Several clusters: each cluster's Events become spans of that cluster, and each watch keeps its
// own checkpoint.
func TestModuleWatchesSeveralClusters(t *testing.T) {
	gvrs := map[schema.GroupVersionResource]string{{Version: "v1", Resource: "events"}: "EventList"}
	clusters := fakeClusters{
		"wl":   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs, coreEvent(t, "u-wl", "5", 1, t0)),
		"mgmt": dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), gvrs, coreEvent(t, "u-mgmt", "7", 1, t0)),
	}
	ckpt := filepath.Join(t.TempDir(), "ckpt.json")
	agg := &aggregatortest.RecordingAggregator{}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var res struct {
		fx.In
		Source  *source
		Sources []*source
	}
	app := fxtest.New(t,
		fx.Supply(Config{Cluster: "wl", Watch: true, WatchClusters: []string{"mgmt"}, Source: sourceConfig{CheckpointFile: ckpt}}),
		fx.Provide(func() aggregator.Aggregator { return agg }),
		fx.Provide(func() kube.Clusters { return clusters }),
		fx.Supply(telemetry.Settings{Logger: slog.New(slog.DiscardHandler), MeterProvider: mp}),
		Module,
		fx.Populate(&res),
	)
	app.RequireStart()
	require.Len(t, res.Sources, 2)
	assert.Same(t, res.Source, res.Sources[0])
	require.Eventually(t, func() bool { return len(agg.Events()) == 2 }, 5*time.Second, 10*time.Millisecond)
	app.RequireStop()
	byCluster := map[string]string{}
	for _, ev := range agg.Events() {
		byCluster[ev.Object.Cluster] = ev.Object.Name
	}
	assert.Equal(t, map[string]string{"wl": "web", "mgmt": "web"}, byCluster)
	assert.FileExists(t, ckpt)
	assert.FileExists(t, ckpt+".mgmt")
	assert.Equal(t, int64(2), sentEvents(t, reader), "both watches count through the module's Settings")

	for _, bad := range []Config{
		{Cluster: "wl", WatchClusters: []string{"mgmt"}},
		{Cluster: "wl", Watch: true, WatchClusters: []string{"wl"}},
		{Cluster: "wl", Watch: true, WatchClusters: []string{""}},
	} {
		assert.Error(t, bad.Validate(), bad)
	}
}

// sentEvents sums kelemetry.event.source.events{result="sent"}.
func sentEvents(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != "kelemetry.event.source.events" || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, _ := dp.Attributes.Value("result"); v.AsString() == resultSent {
					n += dp.Value
				}
			}
		}
	}
	return n
}
