package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConfigBackend(t *testing.T) {
	assert.Equal(t, BackendMemory, Config{}.WithDefaults().Backend)
	assert.Equal(t, BackendEmbedded, Config{Embedded: PebbleConfig{Dir: "x"}}.WithDefaults().Backend)
	assert.Equal(t, BackendMemory, Config{Backend: BackendMemory, Embedded: PebbleConfig{Dir: "x"}}.WithDefaults().Backend)
	assert.ErrorContains(t, Config{Backend: "cassandra"}.Validate(), `unknown backend "cassandra"`)
	assert.ErrorContains(t, Config{Backend: BackendEmbedded}.Validate(), "dir is required")
}
