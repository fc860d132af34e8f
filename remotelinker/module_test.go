package remotelinker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestModuleRemoteLinkerIsALinker wires Module next to the aggregator: the remote linker's links
// land in the sink like any linker's.
func TestModuleRemoteLinkerIsALinker(t *testing.T) {
	url := natsServer(t)
	startWorker(t, connect(t, url), &funcLinker{name: "volumes", fn: func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
		return []aggregator.Link{{Target: cm, Role: aggregator.RoleChild, Class: "volumes"}}, nil
	}}, WorkerConfig{}, telemetry.Settings{})
	sink := &aggregatortest.RecordingSink{}
	var agg aggregator.Aggregator
	app := fxtest.New(t,
		Module, aggregator.Module,
		fx.Supply(Config{NATS: natsqueueURL(url), Linkers: []LinkerConfig{{Name: "volumes"}}}),
		fx.Provide(aggregator.AsSink(func() *aggregatortest.RecordingSink { return sink })),
		fx.Populate(&agg),
	)
	app.RequireStart()
	require.NoError(t, agg.Send(context.Background(), &aggregator.Event{Object: aggregator.Object{ObjectRef: pod},
		Source: "audit", ID: "1", Title: "create", Start: time.Now()}))
	require.Eventually(t, func() bool {
		for _, s := range sink.Spans() {
			if s.Kind == aggregator.KindLink && s.Link.Target.Name == cm.Name {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	app.RequireStop()
}

func TestModuleRejectsTimeoutAboveLinkTimeout(t *testing.T) {
	_, err := newModule(moduleParams{Config: Config{NATS: natsqueueURL("nats://127.0.0.1:4222"),
		Linkers: []LinkerConfig{{Name: "x", Timeout: 20 * time.Second}}}})
	assert.ErrorContains(t, err, "below the aggregator's linkTimeout")
	p, err := newModule(moduleParams{})
	require.NoError(t, err)
	assert.Empty(t, p.Linkers, "no linkers configured, none provided")
}
