package store

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/store/pebble"
)

func TestConfigBackend(t *testing.T) {
	assert.Equal(t, BackendMemory, Config{}.WithDefaults().Backend)
	assert.Equal(t, BackendEmbedded, Config{Embedded: pebble.Config{Dir: "x"}}.WithDefaults().Backend)
	assert.Equal(t, BackendMemory, Config{Backend: BackendMemory, Embedded: pebble.Config{Dir: "x"}}.WithDefaults().Backend)
	assert.ErrorContains(t, Config{Backend: "cassandra"}.Validate(), `unknown backend "cassandra"`)
	assert.ErrorContains(t, Config{Backend: BackendEmbedded}.Validate(), "dir is required")
}
