package store

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/store/pebble"
)

func TestConfigBackend(t *testing.T) {
	assert.Equal(t, backendMemory, Config{}.WithDefaults().Backend)
	assert.Equal(t, backendEmbedded, Config{Embedded: pebble.Config{Dir: "x"}}.WithDefaults().Backend)
	assert.Equal(t, backendMemory, Config{Backend: backendMemory, Embedded: pebble.Config{Dir: "x"}}.WithDefaults().Backend)
	assert.ErrorContains(t, Config{Backend: "cassandra"}.Validate(), `unknown backend "cassandra"`)
	assert.ErrorContains(t, Config{Backend: backendEmbedded}.Validate(), "dir is required")
}
