package audit

import (
	"errors"
	"fmt"

	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/telemetry"
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

// newTaps returns the dump and forwarders that cfg configures, and their Start and Stop (parts of
// the Pipeline). They stop after the webhook's listener (with fx, the listener's hooks come after
// the pipeline's; without, stop serving before Pipeline.Stop), so the last accepted batches are
// still written and sent.
func newTaps(cfg Config, ts telemetry.Settings) ([]webhook.BatchTap, []part, error) {
	var (
		taps  []webhook.BatchTap
		parts []part
	)
	if cfg.Dump.Enabled() {
		d, err := tap.NewDumper(cfg.Dump, ts)
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, part{d.Start, d.Stop})
		taps = append(taps, d)
	}
	for _, fc := range cfg.Forward {
		fw, err := tap.NewForwarder(fc, ts)
		if err != nil {
			return nil, nil, err
		}
		parts = append(parts, part{fw.Start, fw.Stop})
		taps = append(taps, fw)
	}
	return taps, parts, nil
}
