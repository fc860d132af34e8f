package configfile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type inner struct {
	MaxBytes  int64         `yaml:"maxBytes"`
	Count     int           `yaml:"count"`
	Wait      time.Duration `yaml:"wait"`
	Enabled   *bool         `yaml:"enabled"`
	Ratio     float64       `yaml:"ratio"`
	Limit     uint64        `yaml:"limit"`
	Names     []string      `yaml:"names"`
	Labels    map[string]string
	Unchecked custom `yaml:"custom"`
}

type custom struct{ raw string }

func (c *custom) UnmarshalYAML(unmarshal func(any) error) error { return unmarshal(&c.raw) }

type root struct {
	Window time.Duration `yaml:"window"`
	Store  inner         `yaml:"store"`
	Items  []inner       `yaml:"items"`
	Shared `yaml:",inline"`
}

type Shared struct {
	Cluster string `yaml:"cluster"`
}

func problems(t *testing.T, err error) []string {
	t.Helper()
	var ce *Error
	require.True(t, errors.As(err, &ce), "a *configfile.Error, not %v", err)
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.String())
	}
	return out
}

func TestDecodeValid(t *testing.T) {
	var r root
	err := Decode([]byte("window: 30m\ncluster: prod\nstore:\n  maxBytes: 10Gi\n  count: 3\n  wait: 1h30m\n  enabled: false\n  ratio: 0.5\n  limit: 7\n  names: [a, b]\n  custom: anything\nitems:\n  - {maxBytes: 1.5Ki}\n"), &r, Options{File: "k.yaml"})
	require.NoError(t, err)
	assert.Equal(t, 30*time.Minute, r.Window)
	assert.Equal(t, "prod", r.Cluster)
	assert.Equal(t, int64(10<<30), r.Store.MaxBytes)
	assert.Equal(t, 90*time.Minute, r.Store.Wait)
	require.NotNil(t, r.Store.Enabled)
	assert.False(t, *r.Store.Enabled)
	assert.Equal(t, []string{"a", "b"}, r.Store.Names)
	assert.Equal(t, "anything", r.Store.Unchecked.raw)
	assert.Equal(t, int64(1536), r.Items[0].MaxBytes)

	// Empty input and a document of only comments are the zero configuration.
	for _, in := range []string{"", "# nothing\n"} {
		var z root
		require.NoError(t, Decode([]byte(in), &z, Options{File: "k.yaml"}))
		assert.Equal(t, root{}, z)
	}
}

// Every problem is reported, each on its own line with its file, line and key, in line order.
func TestDecodeProblems(t *testing.T) {
	in := "windwo: 30m\nstore:\n  maxBytes: lots\n  count: 2Gi\n  wait: forever\n  enabled: maybe\n  names: a\n  ratio: high\n  limit: -1\naggregator: {window: 1h}\nitems: {a: 1}\n"
	var r root
	err := Decode([]byte(in), &r, Options{File: "k.yaml", Moved: map[string]string{"aggregator": "window"}})
	assert.Equal(t, []string{
		"k.yaml:1: windwo: unknown key; did you mean window?",
		`k.yaml:3: store.maxBytes: "lots" is not a size: write bytes or a number with a unit, such as 512Mi, 10Gi or 1G`,
		`k.yaml:4: store.count: "2Gi" is not a whole number`,
		`k.yaml:5: store.wait: "forever" is not a duration: write a number with a unit, such as 30s, 5m or 168h`,
		`k.yaml:6: store.enabled: "maybe" is not a boolean: write true or false`,
		`k.yaml:7: store.names: want a list ([a, b] or one "- item" a line), not a single value`,
		`k.yaml:8: store.ratio: "high" is not a number`,
		`k.yaml:9: store.limit: "-1" is not a whole number of at least 0`,
		"k.yaml:10: aggregator: this key moved: write it as window",
		"k.yaml:11: items: want a list ([a, b] or one \"- item\" a line), not a mapping",
	}, problems(t, err))

	err = Decode([]byte("store:\n  maxBytes: 1\n  maxBytes: 2\n"), &r, Options{File: "k.yaml"})
	assert.Equal(t, []string{"k.yaml:3: store.maxBytes: set twice in the same mapping"}, problems(t, err))

	err = Decode([]byte("store:\n  bogus: 1\n"), &r, Options{File: "k.yaml"})
	assert.Equal(t, []string{"k.yaml:2: store.bogus: unknown key; the keys here are maxBytes, count, wait, enabled, ratio, limit, names, labels, custom"}, problems(t, err))

	err = Decode([]byte("window: [\n"), &r, Options{File: "k.yaml"})
	require.Len(t, problems(t, err), 1)
	assert.Contains(t, problems(t, err)[0], "k.yaml:")
	assert.Contains(t, problems(t, err)[0], "not valid YAML")

	err = Decode([]byte("- a\n"), &r, Options{File: "k.yaml"})
	assert.Equal(t, []string{"k.yaml:1: the configuration must be a mapping of keys (key: value)"}, problems(t, err))
}

func TestDecodeSets(t *testing.T) {
	var r root
	err := Decode([]byte("store:\n  count: 1\n"), &r, Options{File: "k.yaml", Sets: []string{
		"store.count=5", "store.maxBytes=512Mi", "window=2h", "store.names=[x, y]", "items=[{count: 9}]",
	}})
	require.NoError(t, err)
	assert.Equal(t, 5, r.Store.Count)
	assert.Equal(t, int64(512<<20), r.Store.MaxBytes)
	assert.Equal(t, 2*time.Hour, r.Window)
	assert.Equal(t, []string{"x", "y"}, r.Store.Names)
	assert.Equal(t, 9, r.Items[0].Count)

	// Without a file: the overrides alone.
	var s root
	require.NoError(t, Decode(nil, &s, Options{Sets: []string{"cluster=c2"}}))
	assert.Equal(t, "c2", s.Cluster)

	err = Decode(nil, &s, Options{Sets: []string{"store.wiat=1s", "window", "store.count.x=1", "store..count=1", "store.count=[1"}})
	got := problems(t, err)
	require.Len(t, got, 5)
	assert.Contains(t, got, "--set store.wiat=1s: store.wiat: unknown key; did you mean wait?")
	assert.Contains(t, got, "--set window: want KEY.PATH=VALUE, e.g. --set store.maxBytes=10Gi")
	assert.Contains(t, got, "--set store.count.x=1: store.count: want a single value, not a mapping")
	assert.Contains(t, got, "--set store..count=1: empty key in store..count")
	assert.Contains(t, strings.Join(got, "\n"), "--set store.count=[1: the value is not YAML")
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1048576": 1 << 20, "512Mi": 512 << 20, "10Gi": 10 << 30, "1.5Gi": 3 << 29, "64KiB": 64 << 10,
		"1G": 1e9, "100k": 1e5, "2TB": 2e12, "7B": 7, " 3 Mi ": 3 << 20, "1_000": 1000,
	} {
		got, err := ParseSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "Gi", "-1Gi", "ten", "1Qi", "9999999999Ti", "NaN"} {
		_, err := ParseSize(bad)
		assert.Error(t, err, bad)
	}
}

func TestClosest(t *testing.T) {
	got, ok := Closest("windwo", []string{"window", "cluster", "role"})
	assert.True(t, ok)
	assert.Equal(t, "window", got)
	_, ok = Closest("zzzzzz", []string{"window", "cluster"})
	assert.False(t, ok)
}
