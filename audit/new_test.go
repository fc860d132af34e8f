package audit

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

var quiet = telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}

// TestNewWithoutFx: New builds the pipeline without fx; Start runs the log replay through the
// queue and the consumer into the aggregator, observed; Stop drains the queue.
func TestNewWithoutFx(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	obs := &recordingObserver{}
	pl, err := New(Config{Cluster: "kind", Replay: []string{filepath.Join("..", "testdata", "rollout", "audit.jsonl")}},
		Deps{Aggregator: agg, Observers: []Observer{obs}, Telemetry: quiet})
	require.NoError(t, err)
	require.NotNil(t, pl.Webhook)
	require.NotNil(t, pl.Consumer)
	ctx := context.Background()
	require.NoError(t, pl.Start(ctx))
	<-pl.Replayer.Done()
	require.NoError(t, pl.Stop(ctx))
	assert.Len(t, agg.Events(), 142)
	assert.Equal(t, 205, obs.count())

	_, err = New(Config{Cluster: "-"}, Deps{Aggregator: agg})
	assert.ErrorContains(t, err, "audit config")
}

// TestModule: Module provides the parts New builds and runs them with the application.
func TestModule(t *testing.T) {
	agg := &aggregatortest.RecordingAggregator{}
	var (
		wh       *webhook.Webhook
		replayer *auditlog.Replayer
	)
	app := fxtest.New(t, Module, fx.NopLogger,
		fx.Supply(Config{Cluster: "kind", Replay: []string{filepath.Join("..", "testdata", "rollout", "audit.jsonl")}}),
		fx.Supply(quiet),
		fx.Provide(func() aggregator.Aggregator { return agg }),
		fx.Populate(&wh, &replayer))
	app.RequireStart()
	require.NotNil(t, wh)
	<-replayer.Done()
	app.RequireStop()
	assert.Len(t, agg.Events(), 142)
}

// TestPipelineStartFails: when a part fails to start, those started are stopped, last first, and
// the later ones are not started.
func TestPipelineStartFails(t *testing.T) {
	var calls []string
	fake := func(name string, startErr error) part {
		return part{
			start: func(context.Context) error { calls = append(calls, "start "+name); return startErr },
			stop:  func(context.Context) error { calls = append(calls, "stop "+name); return nil },
		}
	}
	boom := errors.New("boom")
	pl := &Pipeline{parts: []part{fake("a", nil), fake("b", nil), fake("c", boom), fake("d", nil)}}
	assert.ErrorIs(t, pl.Start(context.Background()), boom)
	assert.Equal(t, []string{"start a", "start b", "start c", "stop b", "stop a"}, calls)

	calls = nil
	pl = &Pipeline{parts: []part{fake("a", nil), fake("b", nil)}}
	require.NoError(t, pl.Start(context.Background()))
	require.NoError(t, pl.Stop(context.Background()))
	assert.Equal(t, []string{"start a", "start b", "stop b", "stop a"}, calls)
}
