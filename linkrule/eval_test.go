package linkrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeJSON(t *testing.T) {
	v, err := decodeJSON([]byte(`{"a":1,"b":-2.5,"c":"x\u00e9","d":[true,false,null,{}],"e":1e3,"f":123456789012345678901234}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"a": int64(1), "b": -2.5, "c": "xé", "d": []any{true, false, nil, map[string]any{}}, "e": 1000.0, "f": 1.2345678901234568e+23,
	}, v)
	for _, bad := range []string{`{"a":}`, `{"a":1`, `[1,]`, strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2), ``} {
		_, err := decodeJSON([]byte(bad))
		assert.Error(t, err, bad)
	}
}
