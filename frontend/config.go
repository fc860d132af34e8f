package frontend

import (
	"time"

	"github.com/kelemetry/kelemetry/internal/query"
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
	// MaxMemoryBytes bounds the memory the heavy requests running at once hold, as estimated
	// from what they read (aggregator.Span.ApproxBytes of every span) and render (bytes of
	// JSON). A request is admitted when its estimate, an equal share (MaxMemoryBytes /
	// MaxConcurrent), is free: otherwise it waits like for a turn (QueueWait, then 503 with
	// Retry-After). Running, it may use more while no other request holds it; when the budget
	// has no room left its reads stop and the result says it is truncated ("memory budget of N
	// MiB reached"). 0 (the default): 50% of the Go runtime's memory limit
	// (GOMEMLIMIT, which the all-in-one sets from the container's memory limit) when one is set
	// when the engine is built, no memory bound otherwise; -1: no memory bound.
	MaxMemoryBytes int64 `yaml:"maxMemoryBytes"`

	// CausalRules replace the rules the critical path follows (GET /api/critical-path): unset
	// (nil) means DefaultCausalRules; an empty list means none, so every step follows the latest
	// write of a linked object. See CausalRule and ValidateCausalRules.
	CausalRules []CausalRule `yaml:"causalRules"`
}

// Validate reports a configuration that cannot work: negative values, invalid causal rules.
func (c Config) Validate() error { return c.engine().Validate() }

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	d := c.engine().WithDefaults()
	c.Depth, c.PerLevel, c.Total = d.Depth, d.PerLevel, d.Total
	c.MaxSpans, c.MaxRenderBytes, c.Timeout = d.MaxSpans, d.MaxRenderBytes, d.Timeout
	c.MaxConcurrent, c.QueueWait, c.MaxMemoryBytes = d.MaxConcurrent, d.QueueWait, d.MaxMemoryBytes
	return c
}

// engine is c as the query engine takes it.
func (c Config) engine() query.Config {
	return query.Config{
		Depth: c.Depth, PerLevel: c.PerLevel, Total: c.Total,
		MaxSpans: c.MaxSpans, MaxRenderBytes: c.MaxRenderBytes, Timeout: c.Timeout,
		MaxConcurrent: c.MaxConcurrent, QueueWait: c.QueueWait, MaxMemoryBytes: c.MaxMemoryBytes,
		CausalRules: engineRules(c.CausalRules),
	}
}
