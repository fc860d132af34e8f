package memory

import "fmt"

// defaultMaxSpans is Config.MaxSpans when unset.
const defaultMaxSpans = 1_000_000

// Config configures the in-memory store. The zero value means defaults.
type Config struct {
	// MaxSpans bounds the number of spans held (default 1,000,000). When full, the oldest
	// windows are evicted entirely; a span for the oldest window is itself dropped.
	MaxSpans int `yaml:"maxSpans"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxSpans == 0 {
		c.MaxSpans = defaultMaxSpans
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxSpans < 0:
		return fmt.Errorf("store: maxSpans %d is negative", c.MaxSpans)
	}
	return nil
}
