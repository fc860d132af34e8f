package frontend

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// TestConfigFieldsReachEngine: every field of Config has its counterpart in the engine's config
// and engine copies it, so that a field added to one is not forgotten in the other.
func TestConfigFieldsReachEngine(t *testing.T) {
	ft, qt := reflect.TypeFor[Config](), reflect.TypeFor[query.Config]()
	require.Equal(t, ft.NumField(), qt.NumField())
	c := Config{Depth: 1, PerLevel: 2, Total: 3, MaxSpans: 4, MaxRenderBytes: 5, Timeout: 6 * time.Second,
		MaxConcurrent: 7, QueueWait: 8 * time.Second, MaxMemoryBytes: 9,
		CausalRules: []CausalRule{{Name: "r", Controllers: []string{"c"}, Relation: RelSelf}}}
	fv, qv := reflect.ValueOf(c), reflect.ValueOf(c.engine())
	for i := range ft.NumField() {
		f := ft.Field(i)
		q, ok := qt.FieldByName(f.Name)
		require.True(t, ok, "query.Config has no %s", f.Name)
		assert.Equal(t, f.Tag, q.Tag, f.Name)
		if f.Name == "CausalRules" {
			continue
		}
		assert.False(t, fv.Field(i).IsZero(), "set %s in this test", f.Name)
		assert.Equal(t, fv.Field(i).Interface(), qv.FieldByName(f.Name).Interface(), f.Name)
	}
	assert.Equal(t, []query.CausalRule{{Name: "r", Controllers: []string{"c"}, Relation: query.RelSelf}}, c.engine().CausalRules)
	assert.Nil(t, Config{}.engine().CausalRules, "unset rules stay unset (the defaults)")
	assert.NotNil(t, Config{CausalRules: []CausalRule{}}.engine().CausalRules, "an empty list stays empty (no rules)")
	assert.Len(t, DefaultCausalRules, len(query.DefaultCausalRules))
	assert.Equal(t, Config{Depth: 3, PerLevel: 100, Total: 500, MaxSpans: 200_000, MaxRenderBytes: 64 << 20,
		Timeout: 30 * time.Second, MaxConcurrent: 4, QueueWait: 2 * time.Second, CausalRules: c.CausalRules},
		Config{CausalRules: c.CausalRules}.WithDefaults())
	assert.Equal(t, c, c.WithDefaults(), "set fields stay")
}

func TestNewValidates(t *testing.T) {
	_, _, err := New(Config{MaxRenderBytes: -1}, Deps{Reader: memory.New(memory.Config{}, 0)})
	assert.ErrorContains(t, err, "maxRenderBytes")
	assert.ErrorContains(t, ValidateCausalRules([]CausalRule{{Name: "x", Relation: "sibling"}}), "sibling")
	e, h, err := New(Config{Depth: 2}, Deps{Reader: memory.New(memory.Config{}, 0)})
	require.NoError(t, err)
	assert.Equal(t, 2, e.Config().Depth)
	assert.NotNil(t, h)
}
