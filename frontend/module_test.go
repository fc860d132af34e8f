package frontend

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

func TestNewValidates(t *testing.T) {
	_, _, err := New(Config{MaxRenderBytes: -1}, Deps{Reader: memory.New(memory.Config{}, 0)})
	assert.ErrorContains(t, err, "maxRenderBytes")
	assert.ErrorContains(t, query.ValidateCausalRules([]CausalRule{{Name: "x", Relation: "cousin"}}), "cousin")
	e, h, err := New(Config{Depth: 2}, Deps{Reader: memory.New(memory.Config{}, 0)})
	require.NoError(t, err)
	assert.Equal(t, 2, e.Config().Depth)
	assert.NotNil(t, h)
}
