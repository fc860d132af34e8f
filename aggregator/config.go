package aggregator

import (
	"fmt"
	"time"
)

// Defaults for Config.
const (
	defaultSpanCacheSize = 100_000
	defaultLinkQueueSize = 10_000
	defaultLinkWorkers   = 4
	defaultLinkDepth     = 8
	defaultLinkTimeout   = 10 * time.Second
)

// Config configures the aggregator. The zero value means defaults.
type Config struct {
	// SpanCacheSize bounds the cache of objects whose root span was emitted in a window.
	SpanCacheSize int `yaml:"spanCacheSize"`
	// LinkQueueSize bounds the queue of pending link jobs, shared out evenly among the link
	// workers; a job that does not fit is dropped (and counted) and retried on the object's next
	// event. An IsolatedLinker (e.g. a remote linker) has a queue of this size of its own.
	LinkQueueSize int `yaml:"linkQueueSize"`
	// LinkWorkers is the number of goroutines running linkers. An object's jobs always run on the
	// same worker, in order, so that the links stored do not depend on timing. An IsolatedLinker
	// runs on workers of its own instead (IsolatedLinker.LinkWorkers).
	LinkWorkers int `yaml:"linkWorkers"`
	// LinkDepth limits how far linking follows linked objects transitively (1 = only the
	// objects that have events).
	LinkDepth int `yaml:"linkDepth"`
	// LinkTimeout bounds one link job (all linkers of one object).
	LinkTimeout time.Duration `yaml:"linkTimeout"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.SpanCacheSize == 0 {
		c.SpanCacheSize = defaultSpanCacheSize
	}
	if c.LinkQueueSize == 0 {
		c.LinkQueueSize = defaultLinkQueueSize
	}
	if c.LinkWorkers == 0 {
		c.LinkWorkers = defaultLinkWorkers
	}
	if c.LinkDepth == 0 {
		c.LinkDepth = defaultLinkDepth
	}
	if c.LinkTimeout == 0 {
		c.LinkTimeout = defaultLinkTimeout
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.SpanCacheSize < 0, c.LinkQueueSize < 0, c.LinkWorkers < 0, c.LinkDepth < 0, c.LinkTimeout < 0:
		return fmt.Errorf("aggregator: sizes, counts and timeouts must not be negative")
	}
	return nil
}
