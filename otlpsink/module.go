package otlpsink

import (
	"context"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Params are the fx inputs of Module.
type Params struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// Result is what Module provides: the sink, in the aggregator's sink group, when an endpoint is
// configured.
type Result struct {
	fx.Out

	Sink  *Sink
	Sinks []aggregator.Sink `group:"kelemetry.sinks,flatten"`
}

// Provide builds the sink for Module; without Config.Endpoint it provides none (and Sink is nil).
func Provide(p Params) (Result, error) {
	if p.Config.Endpoint == "" {
		return Result{}, nil
	}
	s, err := New(context.Background(), p.Config, p.Telemetry)
	if err != nil {
		return Result{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(s.Start, s.Stop))
	return Result{Sink: s, Sinks: []aggregator.Sink{s}}, nil
}

// Module exports every span over OTLP to Config.Endpoint, next to the other sinks; it flushes on
// stop. With an empty endpoint it does nothing, so a bundle can include it unconditionally.
var Module = fx.Module("otlpsink", fx.Provide(Provide))
