package aggregator

import (
	"context"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/health"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Value-group tags under which linkers, decorators and sinks are collected.
const (
	linkerGroup    = `group:"kelemetry.linkers"`
	decoratorGroup = `group:"kelemetry.decorators"`
	SinkGroup      = `group:"kelemetry.sinks"`
)

// AsLinker annotates a constructor whose result implements Linker so that the aggregator picks it
// up: fx.Provide(aggregator.AsLinker(NewMyLinker)).
func AsLinker(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Linker)), fx.ResultTags(linkerGroup))
}

// AsDecorator annotates a constructor whose result implements Decorator.
func AsDecorator(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Decorator)), fx.ResultTags(decoratorGroup))
}

// AsSink annotates a constructor whose result implements Sink.
func AsSink(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Sink)), fx.ResultTags(SinkGroup))
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config     Config             `optional:"true"`
	Window     Window             `optional:"true"`
	Telemetry  telemetry.Settings `optional:"true"`
	Linkers    []Linker           `group:"kelemetry.linkers"`
	Decorators []Decorator        `group:"kelemetry.decorators"`
	Sinks      []Sink             `group:"kelemetry.sinks"`
	Lifecycle  fx.Lifecycle
}

// Module provides *Engine and Aggregator, started and stopped with the app. It reads its linkers,
// decorators and sinks from their value groups (AsLinker, AsDecorator, AsSink); every other input
// is optional.
var Module = fx.Module("aggregator",
	fx.Provide(
		newModule,
		func(e *Engine) Aggregator { return e },
		health.AsReady(func(e *Engine) health.Check { return health.Check{Name: "sinks", Func: e.sinksReady} }),
	),
)

// newModule builds the Engine (New) for Module and starts and stops it with the application.
func newModule(p moduleParams) (*Engine, error) {
	e, err := New(p.Config, Deps{
		Window:     p.Window,
		Telemetry:  p.Telemetry,
		Sinks:      p.Sinks,
		Linkers:    p.Linkers,
		Decorators: p.Decorators,
	})
	if err != nil {
		return nil, err
	}
	p.Lifecycle.Append(fx.StartStopHook(e.Start, e.Stop))
	return e, nil
}

// sinksReady is the "sinks" readiness check: it fails while a sink cannot take writes (the store's
// disk is full, Jaeger is out of reach); a sink that is only back-pressured (ErrSinkBusy) keeps
// the process ready, since the webhook sheds load with 429 meanwhile.
func (e *Engine) sinksReady(ctx context.Context) error {
	if err := e.SinkHealth(ctx); err != nil && !OnlyBusy(err) {
		return err
	}
	return nil
}
