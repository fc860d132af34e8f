package remotelinker

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Module provides a Client per linker of Config into the "kelemetry.linkers" value group, so
// that a remote linker is a linker like any other. It connects to NATS when the app starts (and
// keeps reconnecting while NATS is down: the linkers' jobs then fail fast and are counted) and
// closes the connection when it stops, after the aggregator. Without linkers it provides none
// and connects nowhere. Every input is optional.
var Module = fx.Module("remotelinker", fx.Provide(newModule))

// moduleParams are the fx inputs of Module.
type moduleParams struct {
	fx.In

	Config     Config             `optional:"true"`
	Aggregator aggregator.Config  `optional:"true"`
	Telemetry  telemetry.Settings `optional:"true"`
	Lifecycle  fx.Lifecycle       `optional:"true"`
}

// moduleResult is what Module provides.
type moduleResult struct {
	fx.Out

	Linkers []aggregator.Linker `group:"kelemetry.linkers,flatten"`
}

// newModule builds the clients of p.Config for Module; with a Lifecycle it connects on start and
// closes on stop (without one, the clients stay unconnected: use NewClient instead).
func newModule(p moduleParams) (moduleResult, error) {
	cfg := p.Config
	if len(cfg.Linkers) == 0 {
		return moduleResult{}, nil
	}
	if err := cfg.Validate(); err != nil {
		return moduleResult{}, fmt.Errorf("remotelinker: %w", err)
	}
	if err := cfg.ValidateTimeouts(p.Aggregator.WithDefaults().LinkTimeout); err != nil {
		return moduleResult{}, fmt.Errorf("remotelinker: %w", err)
	}
	var conn atomic.Pointer[nats.Conn]
	var out moduleResult
	for _, lc := range cfg.Linkers {
		c, err := newClient(conn.Load, lc, p.Telemetry)
		if err != nil {
			return moduleResult{}, err
		}
		out.Linkers = append(out.Linkers, c)
	}
	if p.Lifecycle != nil {
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(context.Context) error {
				nc, err := natsqueue.Dial(cfg.NATS, p.Telemetry.Log().With("component", "remotelinker"))
				if err != nil {
					return fmt.Errorf("remotelinker: %w", err)
				}
				conn.Store(nc)
				return nil
			},
			OnStop: func(context.Context) error {
				if nc := conn.Swap(nil); nc != nil {
					nc.Close()
				}
				return nil
			},
		})
	}
	return out, nil
}
