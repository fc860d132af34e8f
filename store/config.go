package store

import (
	"fmt"

	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
)

// Backends of Config.Backend.
const (
	backendEmbedded = "embedded"
	backendMemory   = "memory"
	BackendJaeger   = "jaeger"
)

// Config chooses and configures the store. The zero value is the in-memory store.
type Config struct {
	// Backend is "embedded" (Pebble in Embedded.Dir), "memory", or "jaeger" (a Jaeger backend
	// shared by several processes, see jaeger.Config); empty means embedded when Embedded.Dir is
	// set, memory otherwise.
	Backend string `yaml:"backend"`
	// Embedded configures the embedded Pebble store.
	Embedded pebble.Config `yaml:"embedded"`
	// Memory configures the in-memory store.
	Memory memory.Config `yaml:"memory"`
	// Jaeger configures the jaeger backend.
	Jaeger jaeger.Config `yaml:"jaeger"`
}

// WithDefaults returns c with the backend chosen.
func (c Config) WithDefaults() Config {
	if c.Backend == "" {
		c.Backend = backendMemory
		if c.Embedded.Dir != "" {
			c.Backend = backendEmbedded
		}
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch c.Backend {
	case backendEmbedded:
		return c.Embedded.Validate()
	case backendMemory:
		return c.Memory.Validate()
	case BackendJaeger:
		return c.Jaeger.Validate()
	default:
		return fmt.Errorf("store: unknown backend %q (want %q, %q or %q)", c.Backend, backendEmbedded, backendMemory, BackendJaeger)
	}
}
