package event

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/aggregator/aggregatortest"
)

func TestModuleReplay(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	var r *Replayer
	var src *Source
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
	assert.Equal(t, 30, stats[0].Sent)
	assert.Nil(t, src)
	app.RequireStop()
	assert.Len(t, agg.Events(), 30)
}

func TestModuleWatchNeedsClusters(t *testing.T) {
	err := fx.ValidateApp(
		fx.Supply(Config{Watch: true}),
		fx.Provide(func() aggregator.Aggregator { return &aggregatortest.RecordingAggregator{} }),
		Module,
		fx.Invoke(func(*Source) {}),
	)
	require.NoError(t, err, "the graph is valid")
	app := fx.New(
		fx.Supply(Config{Watch: true}),
		fx.Provide(func() aggregator.Aggregator { return &aggregatortest.RecordingAggregator{} }),
		Module,
		fx.Invoke(func(*Source) {}),
		fx.NopLogger,
	)
	assert.ErrorContains(t, app.Err(), "kubeconfig")
	_ = context.Background()
}
