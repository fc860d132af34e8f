package linker

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Defaults for ObjectCacheConfig and DiscoveryConfig.
const (
	DefaultObjectCacheSize    = 10_000
	DefaultObjectCacheTTL     = time.Minute
	DefaultNegativeTTL        = 10 * time.Second
	DefaultFetchTimeout       = 5 * time.Second
	DefaultMinRefreshInterval = time.Minute
	DefaultDiscoveryMaxAge    = time.Hour
)

// Config configures the built-in linkers. The zero value means defaults: both linkers enabled.
type Config struct {
	// ObjectCache configures the cache of objects fetched from the API servers when an event
	// carries no body.
	ObjectCache ObjectCacheConfig `yaml:"objectCache"`
	// Discovery configures how kinds are mapped to resources with the clusters' discovery APIs.
	Discovery DiscoveryConfig `yaml:"discovery"`
	// DisableOwner turns the owner-reference linker off.
	DisableOwner bool `yaml:"disableOwner"`
	// DisableAnnotation turns the parent-link annotation linker off.
	DisableAnnotation bool `yaml:"disableAnnotation"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if err := c.ObjectCache.Validate(); err != nil {
		return err
	}
	return c.Discovery.Validate()
}

// ObjectCacheConfig configures ObjectCache. The zero value means defaults.
type ObjectCacheConfig struct {
	// Size bounds the number of cached objects, found or not (default 10,000).
	Size int `yaml:"size"`
	// TTL is how long a fetched object is served from the cache (default 1m).
	TTL time.Duration `yaml:"ttl"`
	// NegativeTTL is how long "not found" is remembered (default 10s).
	NegativeTTL time.Duration `yaml:"negativeTTL"`
	// FetchTimeout bounds one GET from an API server (default 5s).
	FetchTimeout time.Duration `yaml:"fetchTimeout"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ObjectCacheConfig) WithDefaults() ObjectCacheConfig {
	if c.Size == 0 {
		c.Size = DefaultObjectCacheSize
	}
	if c.TTL == 0 {
		c.TTL = DefaultObjectCacheTTL
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = DefaultNegativeTTL
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c ObjectCacheConfig) Validate() error {
	if c.Size < 0 || c.TTL < 0 || c.NegativeTTL < 0 || c.FetchTimeout < 0 {
		return fmt.Errorf("linker: object cache size, TTLs and fetch timeout must not be negative")
	}
	return nil
}

// DiscoveryConfig configures DiscoveryMapper and the discovery clients of KubeClusters. The zero
// value means defaults.
type DiscoveryConfig struct {
	// MinRefreshInterval is the shortest time between two discoveries of one cluster (default 1m).
	// It bounds the discoveries that unknown kinds can cause.
	MinRefreshInterval time.Duration `yaml:"minRefreshInterval"`
	// MaxAge is how long discovery results are used before the next lookup refreshes them
	// (default 1h).
	MaxAge time.Duration `yaml:"maxAge"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c DiscoveryConfig) WithDefaults() DiscoveryConfig {
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultDiscoveryMaxAge
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c DiscoveryConfig) Validate() error {
	if c.MinRefreshInterval < 0 || c.MaxAge < 0 {
		return fmt.Errorf("linker: discovery intervals must not be negative")
	}
	return nil
}

func meterFrom(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	return mp.Meter("github.com/kelemetry/kelemetry/linker")
}

func loggerOrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
