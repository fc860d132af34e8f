package frontend

import (
	"errors"
	"fmt"
	"time"
)

// Config configures the query side: how far links are followed, what one request may spend
// (spans read, bytes rendered, time) and how many heavy requests run at once. Zero fields mean
// the defaults.
type Config struct {
	// Depth is how many levels links are followed up or down (default 3).
	Depth int `yaml:"depth"`
	// PerLevel bounds the objects one breadth-first level adds (default 100).
	PerLevel int `yaml:"perLevel"`
	// Total bounds the objects one walk adds to the found object (default 500).
	Total int `yaml:"total"`

	// MaxSpans bounds the stored spans one request reads (default 200,000). Past it, the
	// objects not read yet are shown without their events and the result says it is truncated.
	MaxSpans int `yaml:"maxSpans"`
	// MaxRenderBytes bounds the JSON one request renders, in bytes (default 64 MiB). Past it,
	// the remaining spans and results are left out and the result says it is truncated.
	MaxRenderBytes int64 `yaml:"maxRenderBytes"`
	// Timeout bounds the time one request spends reading (default 30s). Past it, what was read
	// is shown as a truncated result, or 503 when nothing was.
	Timeout time.Duration `yaml:"timeout"`
	// MaxConcurrent bounds the heavy requests (searches, traces, object listings) that run at
	// once (default 4). Cheap ones (services, operations, the UI's files) are not counted.
	MaxConcurrent int `yaml:"maxConcurrent"`
	// QueueWait is how long a heavy request waits for a turn before it is refused with 503 and
	// Retry-After (default 2s). At most 4×MaxConcurrent requests wait; others are refused at once.
	QueueWait time.Duration `yaml:"queueWait"`

	// CausalRules replace the rules the critical path follows (GET /api/critical-path): unset
	// (nil) means DefaultCausalRules; an empty list means none, so every step follows the latest
	// write of a linked object. See CausalRule and ValidateCausalRules.
	CausalRules []CausalRule `yaml:"causalRules"`
}

// EngineConfig is the former name of Config, kept for existing callers.
type EngineConfig = Config

// Defaults for Config.
const (
	DefaultDepth          = 3
	DefaultPerLevel       = 100
	DefaultTotal          = 500
	DefaultMaxSpans       = 200_000
	DefaultMaxRenderBytes = 64 << 20
	DefaultTimeout        = 30 * time.Second
	DefaultMaxConcurrent  = 4
	DefaultQueueWait      = 2 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Depth <= 0 {
		c.Depth = DefaultDepth
	}
	if c.PerLevel <= 0 {
		c.PerLevel = DefaultPerLevel
	}
	if c.Total <= 0 {
		c.Total = DefaultTotal
	}
	if c.MaxSpans <= 0 {
		c.MaxSpans = DefaultMaxSpans
	}
	if c.MaxRenderBytes <= 0 {
		c.MaxRenderBytes = DefaultMaxRenderBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.QueueWait <= 0 {
		c.QueueWait = DefaultQueueWait
	}
	return c
}

// Validate reports a configuration that cannot work: negative values, invalid causal rules.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"depth", int64(c.Depth)}, {"perLevel", int64(c.PerLevel)}, {"total", int64(c.Total)},
		{"maxSpans", int64(c.MaxSpans)}, {"maxRenderBytes", c.MaxRenderBytes}, {"timeout", int64(c.Timeout)},
		{"maxConcurrent", int64(c.MaxConcurrent)}, {"queueWait", int64(c.QueueWait)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("frontend: %s %d is negative", f.name, f.v))
		}
	}
	for _, err := range causalRuleErrors(c.CausalRules) {
		errs = append(errs, fmt.Errorf("frontend: %w", err))
	}
	return errors.Join(errs...)
}
