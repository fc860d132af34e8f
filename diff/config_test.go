package diff_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/diff"
)

func TestStreamConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  diff.StreamConfig
		want string
	}{
		{"zero", diff.StreamConfig{}, ""},
		{"negative", diff.StreamConfig{MaxChanges: -1}, "must not be negative"},
		{"body above bytes", diff.StreamConfig{MaxBytes: 1 << 10, MaxBodyBytes: 2 << 10}, "less than maxBodyBytes"},
		{"default body above bytes", diff.StreamConfig{MaxBytes: 1 << 10}, "less than maxBodyBytes"},
		{"empty ignore path", diff.StreamConfig{Compare: diff.Options{Ignore: []string{""}}}, "empty ignore path"},
		{"rule without paths", diff.StreamConfig{Compare: diff.Options{Redact: []diff.RedactRule{{Resource: "configmaps"}}}}, "neither paths nor pathRegex"},
		{"bad regex", diff.StreamConfig{Compare: diff.Options{Redact: []diff.RedactRule{{PathRegex: "("}}}}, "missing closing"},
		{"bad resource", diff.StreamConfig{Compare: diff.Options{Redact: []diff.RedactRule{{Resource: "/x", Paths: []string{"data"}}}}}, `"group/resource"`},
		{"negative lcs", diff.StreamConfig{Compare: diff.Options{MaxLCS: -1}}, "maxLCS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	d := diff.StreamConfig{}.WithDefaults()
	assert.Equal(t, 20_000, d.CacheSize)
	assert.Equal(t, int64(32<<20), d.MaxBytes)
	assert.Equal(t, diff.StreamConfig{CacheSize: 7}.WithDefaults().CacheSize, 7, "set fields are kept")
}

func TestParseResource(t *testing.T) {
	for in, want := range map[string]diff.Resource{
		"":                 {},
		"secrets":          {Resource: "secrets"},
		"apps/deployments": {Group: "apps", Resource: "deployments"},
	} {
		got, err := diff.ParseResource(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"/secrets", "apps/", "a/b/c"} {
		_, err := diff.ParseResource(bad)
		assert.Error(t, err, bad)
	}
}
