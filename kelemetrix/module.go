package kelemetrix

import (
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/telemetry"
)

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	// Config defines the metrics (none: the processor does nothing).
	Config Config `optional:"true"`
	// Telemetry gives the logger and the meter provider the metrics are created with.
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Processor *Processor
	// Observer attaches the processor to the audit pipeline of audit.Module.
	Observer audit.Observer `group:"kelemetry.audit.observers"`
}

// newModule builds the Processor (New) of Module and hooks its Start and Stop to the lifecycle.
func newModule(p moduleParams) (moduleResult, error) {
	proc, err := New(p.Config, p.Telemetry)
	if err != nil {
		return moduleResult{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(proc.Start, proc.Stop))
	if len(proc.metrics) == 0 {
		// Nothing to observe: the pipeline's queue is then not wrapped (an observer may keep the
		// events, so the webhook could no longer reuse a body once its events were handled).
		return moduleResult{Processor: proc}, nil
	}
	return moduleResult{Processor: proc, Observer: proc}, nil
}

// cardinality gives telemetry.Module's provider the series kelemetrix's metrics keep.
type cardinality struct {
	fx.Out

	Limit telemetry.CardinalityLimit `group:"kelemetry.telemetry.cardinality"`
}

// cardinalityParams are the inputs of newCardinality.
type cardinalityParams struct {
	fx.In

	Config Config `optional:"true"`
}

func newCardinality(p cardinalityParams) cardinality {
	return cardinality{Limit: p.Config.CardinalityLimit()}
}

// Module provides the Processor and, when its Config has metrics, attaches it to audit.Module's
// pipeline as an observer: every batch the webhook, log replay and log follow enqueue is also
// turned into metric points. It
// needs a Config (optional: no metrics without one) and telemetry.Settings, and makes the
// provider of telemetry.Module keep every series of the metrics (Config.CardinalityLimit).
var Module = fx.Module("kelemetrix", fx.Provide(newModule, newCardinality))
