package pebble

import (
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Defaults of Config.
const (
	defaultMaxAge         = 7 * 24 * time.Hour
	defaultMaxBytes       = 10 << 30
	defaultCheckInterval  = time.Minute
	defaultIndexCacheSize = 100_000
	defaultCacheSize      = 32 << 20
	defaultMaxFutureSkew  = query.DefaultMaxFutureSkew
)

// Config configures the persistent store. The zero value means defaults, except Dir,
// which is required.
type Config struct {
	// Dir is the database directory; it is created if missing.
	Dir string `yaml:"dir"`
	// MaxAge is how long a window is kept after it ends (default 7 days).
	MaxAge time.Duration `yaml:"maxAge"`
	// MaxBytes bounds the database size on disk, every file in Dir counted as du counts it,
	// write-ahead log included (default 10 GiB, or less when the filesystem is smaller; at least
	// 64 MiB). The memtable (maxBytes/64, 1-16 MiB), the write-ahead logs and the
	// free space kept for writes (the write reserve, 4 memtables plus 4 to 16 MiB) are sized for
	// it. Opening the store compares it with the filesystem: a value set that does not fit the
	// filesystem with the write reserve beside it is an error; the default is shrunk to fit with
	// the write reserve and a third more (at most 1 GiB) for compactions and ingest between two
	// checks, with a warning; either gets a warning when other files leave too little room.
	// Above it, windows are deleted: those dated after the current window first, then the
	// oldest. The current window (the newest one starting at or before now) is never deleted for
	// size; when it alone is too large, an error is logged and counted on every check.
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxFutureSkew is how far past the current time a window may start and still be kept by age
	// retention (default 24h). A window starting later (a future-dated event) is deleted by age
	// retention. A window dated after now, even within the skew, is never the current window that
	// size retention protects: size retention deletes it before any older window.
	MaxFutureSkew time.Duration `yaml:"maxFutureSkew"`
	// CheckInterval is the period of the retention loop (default 1m); a nearly full disk wakes
	// it sooner (at most every 2s).
	CheckInterval time.Duration `yaml:"checkInterval"`
	// IndexCacheSize bounds the in-process cache of (trace, window) pairs whose index entries
	// were already written (default 100,000).
	IndexCacheSize int `yaml:"indexCacheSize"`
	// CacheSize is the Pebble block cache size in bytes (default 32 MiB). Pebble reserves the
	// memtables in it (usually two of up to 16 MiB while ingesting: the one written and the one
	// kept for reuse; three while a flush is slow), so with the defaults the store's memory
	// outside the Go heap stays near it; what the memtables leave holds blocks read by queries.
	CacheSize int64 `yaml:"cacheSize"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxAge == 0 {
		c.MaxAge = defaultMaxAge
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = defaultCheckInterval
	}
	if c.MaxFutureSkew == 0 {
		c.MaxFutureSkew = defaultMaxFutureSkew
	}
	if c.IndexCacheSize == 0 {
		c.IndexCacheSize = defaultIndexCacheSize
	}
	if c.CacheSize == 0 {
		c.CacheSize = defaultCacheSize
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Dir == "":
		return errors.New("store: dir is required")
	case c.MaxAge < 0, c.CheckInterval < 0, c.MaxFutureSkew < 0:
		return errors.New("store: maxAge, checkInterval and maxFutureSkew must not be negative")
	case c.MaxBytes < 0, c.IndexCacheSize < 0, c.CacheSize < 0:
		return errors.New("store: maxBytes, indexCacheSize and cacheSize must not be negative")
	case c.MaxBytes < minMaxBytes:
		return fmt.Errorf("store: maxBytes %d is below the minimum of %d (64 MiB)", c.MaxBytes, minMaxBytes)
	}
	return nil
}
