package kelemetrix

import (
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Params are the fx inputs of NewModule.
type Params struct {
	fx.In

	// Config defines the metrics (none: the processor does nothing).
	Config Config `optional:"true"`
	// Telemetry gives the logger and the meter provider the metrics are created with.
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// Result are the fx outputs of NewModule.
type Result struct {
	fx.Out

	Processor *Processor
	// Observer attaches the processor to the audit pipeline of audit.Module.
	Observer audit.Observer `group:"kelemetry.audit.observers"`
}

// NewModule builds the Processor of Module and hooks its Start and Stop to the lifecycle.
func NewModule(p Params) (Result, error) {
	proc, err := New(p.Config, p.Telemetry)
	if err != nil {
		return Result{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(proc.Start, proc.Stop))
	return Result{Processor: proc, Observer: proc}, nil
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

// Module provides the Processor and attaches it to audit.Module's pipeline as an observer: every
// batch the webhook, log replay and log follow enqueue is also turned into metric points. It
// needs a Config (optional: no metrics without one) and telemetry.Settings, and makes the
// provider of telemetry.Module keep every series of the metrics (Config.CardinalityLimit).
var Module = fx.Module("kelemetrix", fx.Provide(NewModule, newCardinality))
