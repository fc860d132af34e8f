package audit

import (
	"errors"
	"fmt"

	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/telemetry"
	"go.uber.org/fx"
)

// validateTaps validates the dump and forward configurations.
func (c Config) validateTaps() error {
	errs := []error{c.Dump.Validate()}
	for i, f := range c.Forward {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("audit forward[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// newTaps returns the dump and forwarders that cfg configures, started and stopped with lc. They
// stop after the webhook's listener (fx stops in reverse order of start), so the last accepted
// batches are still written and sent.
func newTaps(cfg Config, lc fx.Lifecycle, ts telemetry.Settings) ([]webhook.BatchTap, error) {
	var taps []webhook.BatchTap
	if cfg.Dump.Enabled() {
		d, err := tap.NewDumper(cfg.Dump, ts)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.StartStopHook(d.Start, d.Stop))
		taps = append(taps, d)
	}
	for _, fc := range cfg.Forward {
		fw, err := tap.NewForwarder(fc, ts)
		if err != nil {
			return nil, err
		}
		lc.Append(fx.StartStopHook(fw.Start, fw.Stop))
		taps = append(taps, fw)
	}
	return taps, nil
}
