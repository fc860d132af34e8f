package otlpsink

import (
	"context"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule: the sink, in the aggregator's sink group, when an
// endpoint is configured.
type moduleResult struct {
	fx.Out

	Sink  *Sink
	Sinks []aggregator.Sink `group:"kelemetry.sinks,flatten"`
}

// newModule builds the sink (New) for Module and starts and stops it with the application;
// without Config.Endpoint it provides none (and Sink is nil).
func newModule(p moduleParams) (moduleResult, error) {
	if p.Config.Endpoint == "" {
		return moduleResult{}, nil
	}
	s, err := New(context.Background(), p.Config, p.Telemetry)
	if err != nil {
		return moduleResult{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(s.Start, s.Stop))
	return moduleResult{Sink: s, Sinks: []aggregator.Sink{s}}, nil
}

// Module exports every span over OTLP to Config.Endpoint, next to the other sinks; it flushes on
// stop. With an empty endpoint it does nothing, so a bundle can include it unconditionally.
var Module = fx.Module("otlpsink", fx.Provide(newModule))
