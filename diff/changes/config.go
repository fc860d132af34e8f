package changes

import (
	"fmt"
	"time"
)

// CacheConfig bounds the informer diff's change cache (the records kept in this process). The
// zero value means defaults.
type CacheConfig struct {
	// MaxEntries bounds the records kept (default 100,000).
	MaxEntries int `yaml:"maxEntries"`
	// MaxBytes bounds the approximate bytes of the records kept (default 64 MiB).
	MaxBytes int64 `yaml:"maxBytes"`
	// TTL is how long a record is kept (default 10m).
	TTL time.Duration `yaml:"ttl"`
}

// Validate reports a configuration that cannot work.
func (c CacheConfig) Validate() error {
	if c.MaxEntries < 0 || c.MaxBytes < 0 || c.TTL < 0 {
		return fmt.Errorf("diff change cache: bounds must not be negative")
	}
	return nil
}
