package query

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config is frontend.Config as the engine takes it (see there for the fields).
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
	// MaxMemoryBytes bounds the memory the heavy requests running at once hold, as estimated
	// from what they read (aggregator.Span.ApproxBytes of every span) and render (bytes of
	// JSON). A request is admitted when its estimate, an equal share (MaxMemoryBytes /
	// MaxConcurrent), is free: otherwise it waits like for a turn (QueueWait, then 503 with
	// Retry-After). Running, it may use more while no other request holds it; when the budget
	// has no room left its reads stop and the result says it is truncated ("memory budget of N
	// MiB reached"). 0 (the default): 40% of the Go runtime's memory limit
	// (GOMEMLIMIT, which the all-in-one sets from the container's memory limit) when one is set
	// when the engine is built, no memory bound otherwise; -1: no memory bound. While heavy
	// requests run, the garbage collector may let the heap grow by their shares (256 MiB each
	// without a bound) before it collects: the memory set aside for them is its headroom.
	MaxMemoryBytes int64 `yaml:"maxMemoryBytes"`

	// CausalRules replace the rules the critical path follows (GET /api/critical-path): unset
	// (nil) means DefaultCausalRules; an empty list means none, so every step follows the latest
	// write of a linked object. See CausalRule and ValidateCausalRules.
	CausalRules []CausalRule `yaml:"causalRules"`
}

// Defaults for Config.
const (
	defaultDepth          = 3
	defaultPerLevel       = 100
	defaultTotal          = 500
	defaultMaxSpans       = 200_000
	defaultMaxRenderBytes = 64 << 20
	defaultTimeout        = 30 * time.Second
	defaultMaxConcurrent  = 4
	defaultQueueWait      = 2 * time.Second
	// defaultMemoryPercent is the share of the Go memory limit that MaxMemoryBytes defaults to.
	// The rest is for what ingestion keeps (about 0.6 GiB at most with the defaults, see the
	// memory page, docs/operations/memory.md) and for garbage not collected yet. The heap the
	// queries hold is more than their charges: rounds of four heavy queries marked up to 1.35
	// times the budget live (the spans' estimates, the results being drawn and what was
	// allocated while the collector marked), so the collector runs almost without pause when the
	// budget nears the limit. With 60%, under a 2 GiB container limit, it hardly paused; with
	// 50%, under a 602 MiB one (GOMEMLIMIT 512 MiB), the heap overshot the Go memory limit by up
	// to 40 MiB while the collector marked, and RSS reached 562-623 MiB in eleven runs of
	// cmd/kelemetry's memory tests; with 40%, 531-581 MiB (some runs with two busy loops
	// taking the cores).
	defaultMemoryPercent = 40
)

// MemoryBudget is MaxMemoryBytes resolved against goMemLimit, the Go runtime's memory limit (0
// or math.MaxInt64: none): the bytes the heavy requests may hold at once, 0 when unbounded.
func (c Config) MemoryBudget(goMemLimit int64) int64 {
	switch {
	case c.MaxMemoryBytes > 0:
		return c.MaxMemoryBytes
	case c.MaxMemoryBytes < 0 || goMemLimit <= 0 || goMemLimit == math.MaxInt64:
		return 0
	default:
		return int64(float64(goMemLimit) * defaultMemoryPercent / 100)
	}
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Depth <= 0 {
		c.Depth = defaultDepth
	}
	if c.PerLevel <= 0 {
		c.PerLevel = defaultPerLevel
	}
	if c.Total <= 0 {
		c.Total = defaultTotal
	}
	if c.MaxSpans <= 0 {
		c.MaxSpans = defaultMaxSpans
	}
	if c.MaxRenderBytes <= 0 {
		c.MaxRenderBytes = defaultMaxRenderBytes
	}
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = defaultMaxConcurrent
	}
	if c.QueueWait <= 0 {
		c.QueueWait = defaultQueueWait
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
	if c.MaxMemoryBytes < -1 {
		errs = append(errs, fmt.Errorf("frontend: maxMemoryBytes %d: want bytes, 0 (the default) or -1 (no memory bound)", c.MaxMemoryBytes))
	}
	for _, err := range causalRuleErrors(c.CausalRules) {
		errs = append(errs, fmt.Errorf("frontend: %w", err))
	}
	return errors.Join(errs...)
}
