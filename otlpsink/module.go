package otlpsink

import (
	"context"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// params are the fx inputs of Module.
type params struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// result is what Module provides: the sink, in the aggregator's sink group, when an endpoint is
// configured.
type result struct {
	fx.Out

	Sink  *Sink
	Sinks []aggregator.Sink `group:"kelemetry.sinks,flatten"`
}

// provide builds the sink for Module; without Config.Endpoint it provides none (and Sink is nil).
func provide(p params) (result, error) {
	if p.Config.Endpoint == "" {
		return result{}, nil
	}
	s, err := New(context.Background(), p.Config, p.Telemetry)
	if err != nil {
		return result{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(s.Start, s.Stop))
	return result{Sink: s, Sinks: []aggregator.Sink{s}}, nil
}

// Module exports every span over OTLP to Config.Endpoint, next to the other sinks; it flushes on
// stop. With an empty endpoint it does nothing, so a bundle can include it unconditionally.
var Module = fx.Module("otlpsink", fx.Provide(provide))
