package store

import (
	"context"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Open opens the store cfg chooses, for traces of window length w. Whatever the backend, the
// store is then started and stopped as Store says.
func Open(ctx context.Context, cfg Config, w aggregator.Window, tel telemetry.Settings) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	switch cfg.Backend {
	case backendMemory:
		return memory.New(cfg.Memory, w), nil
	case BackendJaeger:
		return jaeger.Open(ctx, cfg.Jaeger, w, tel)
	}
	p, err := pebble.Open(ctx, cfg.Embedded, w, tel)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Window    aggregator.Window  `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// newModule opens the store (Open) for Module, started and stopped with the application.
func newModule(p moduleParams) (Store, error) {
	s, err := Open(context.Background(), p.Config, p.Window, p.Telemetry)
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.StartStopHook(s.Start, s.Stop))
	return s, nil
}

// Module provides the store chosen by Config (the embedded Pebble store, memory, or a Jaeger
// backend) as Store, started and stopped with the application, and that Store as the Reader of the query side and as a sink of the aggregator. Leave it out
// for a binary without storage (spans go only to other sinks), or replace the Store with
// fx.Replace / fx.Decorate: the reader and the sink follow, and the built-in store is then not
// opened.
var Module = fx.Module("store",
	fx.Provide(
		newModule,
		func(s Store) Reader { return s },
		fx.Annotate(func(s Store) aggregator.Sink { return s }, fx.ResultTags(aggregator.SinkGroup)),
	),
)
