package aggregator

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
)

// Value-group tags under which linkers, decorators and sinks are collected.
const (
	LinkerGroup    = `group:"kelemetry.linkers"`
	DecoratorGroup = `group:"kelemetry.decorators"`
	SinkGroup      = `group:"kelemetry.sinks"`
)

// AsLinker annotates a constructor whose result implements Linker so that the aggregator picks it
// up: fx.Provide(aggregator.AsLinker(NewMyLinker)).
func AsLinker(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Linker)), fx.ResultTags(LinkerGroup))
}

// AsDecorator annotates a constructor whose result implements Decorator.
func AsDecorator(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Decorator)), fx.ResultTags(DecoratorGroup))
}

// AsSink annotates a constructor whose result implements Sink.
func AsSink(ctor any) any {
	return fx.Annotate(ctor, fx.As(new(Sink)), fx.ResultTags(SinkGroup))
}

// Params are the fx inputs of the aggregator.
type Params struct {
	fx.In

	Config        Config               `optional:"true"`
	Logger        *slog.Logger         `optional:"true"`
	MeterProvider metric.MeterProvider `optional:"true"`
	Linkers       []Linker             `group:"kelemetry.linkers"`
	Decorators    []Decorator          `group:"kelemetry.decorators"`
	Sinks         []Sink               `group:"kelemetry.sinks"`
}

// Module provides *Engine and Aggregator, started and stopped with the app.
var Module = fx.Module("aggregator",
	fx.Provide(
		func(p Params, lc fx.Lifecycle) (*Engine, error) {
			e, err := New(p.Config, Deps{
				Logger:        p.Logger,
				MeterProvider: p.MeterProvider,
				Sinks:         p.Sinks,
				Linkers:       p.Linkers,
				Decorators:    p.Decorators,
			})
			if err != nil {
				return nil, err
			}
			lc.Append(fx.StartStopHook(e.Start, e.Stop))
			return e, nil
		},
		func(e *Engine) Aggregator { return e },
	),
)
