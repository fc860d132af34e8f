package docgen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small module: the root Config holds structs of another package through an alias, a list, a
// map, an inline struct, a pointer and a field left out; a nested module is not part of it.
func testModule(t *testing.T) *Module {
	t.Helper()
	root := writeTree(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"config.go": `package m

import (
	"time"

	"example.com/m/sub"
	other "example.com/m/sub"
)

// Config configures it all.
type Config struct {
	// DataDir holds the data; see also MaxAge and Sub.Limit (Config.Role is the role).
	DataDir string ` + "`yaml:\"dataDir\"`" + `
	// MaxAge is how long; DataDir is pruned.
	MaxAge time.Duration ` + "`yaml:\"maxAge\"`" + `
	Queue  Queue         ` + "`yaml:\"queue\"`" + `
	Items  []sub.Item    ` + "`yaml:\"items\"`" + `
	ByName map[string]*other.Item ` + "`yaml:\"byName\"`" + `
	Alias  ItemAlias     ` + "`yaml:\"alias\"`" + `
	Flat   sub.Flat      ` + "`yaml:\",inline\"`" + `
	Hidden int           ` + "`yaml:\"-\"`" + `
	// NoTag has no tag: the key is its name lowercased.
	NoTag  *bool
	Self   *Config       ` + "`yaml:\"self\"`" + `
	hidden int
}

// ItemAlias is sub.Item.
type ItemAlias = sub.Item

// Queue configures a queue.
type Queue struct {
	// QPS and Burst limit it.
	QPS   float64 ` + "`yaml:\"qps\"`" + `
	Burst int     ` + "`yaml:\"burst\"`" + `
	// Other says that Extra is more.
	Other string ` + "`yaml:\"other\"`" + `
	Extra string ` + "`yaml:\"extra\"`" + `
	Odd   string ` + "`yaml:\"odd\"`" + `
}
`,
		"sub/sub.go": `package sub

// Item is an item.
type Item struct {
	// Name names it.
	Name string ` + "`yaml:\"name\"`" + `
	Tags []string ` + "`yaml:\"tags\"`" + `
}

// Flat is lifted into its parent.
type Flat struct {
	// Limit bounds things (default 10).
	Limit int ` + "`yaml:\"limit\"`" + `
}
`,
		"nested/go.mod":    "module example.com/nested\n",
		"nested/nested.go": "package nested\n\ntype Config struct{ X int }\n",
	})
	m, err := LoadModule(root)
	require.NoError(t, err)
	return m
}

func TestConfigFields(t *testing.T) {
	m := testModule(t)
	assert.Equal(t, []string{"example.com/m", "example.com/m/sub"}, m.Packages(), "no nested module")
	fields, err := m.ConfigFields("example.com/m", "Config", "yaml")
	require.NoError(t, err)
	got := map[string]Field{}
	var paths []string
	for _, f := range fields {
		got[f.Path] = f
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{
		"dataDir", "maxAge", "queue", "queue.qps", "queue.burst", "queue.other", "queue.extra", "queue.odd",
		"items", "items[].name", "items[].tags", "byName", "byName.<name>.name", "byName.<name>.tags",
		"alias", "alias.name", "alias.tags", "limit", "notag", "self",
	}, paths, "a recursive type stops; yaml:\"-\" and unexported fields are not keys")
	assert.Equal(t, Field{Path: "dataDir", Type: "string", Doc: "`dataDir` holds the data; see also `maxAge` and Sub.Limit (Config.Role is the role).\n"}, got["dataDir"],
		"names of sibling fields become keys, qualified names stay")
	assert.Equal(t, "duration", got["maxAge"].Type)
	assert.Equal(t, Field{Path: "queue", Type: "object", Doc: "Configures a queue.\n", Object: true}, got["queue"], "without a doc comment, the type's")
	assert.Equal(t, "`qps` and `burst` limit it.\n", got["queue.qps"].Doc)
	assert.Equal(t, "See `queue.qps`.", got["queue.burst"].Doc, "named first by a sibling")
	assert.Equal(t, "See `queue.other`.", got["queue.extra"].Doc, "named further on by a sibling")
	assert.Empty(t, got["queue.odd"].Doc)
	assert.Equal(t, "list of object", got["items"].Type)
	assert.Equal(t, "list of string", got["items[].tags"].Type)
	assert.Equal(t, "map of object", got["byName"].Type)
	assert.Equal(t, "object", got["alias"].Type)
	assert.Equal(t, "`limit` bounds things (default 10).\n", got["limit"].Doc)
	assert.Equal(t, "bool", got["notag"].Type)

	_, err = m.ConfigFields("example.com/m", "Missing", "yaml")
	assert.ErrorContains(t, err, "type example.com/m.Missing not found")
	_, err = m.ConfigFields("example.com/nested", "Config", "yaml")
	assert.ErrorContains(t, err, "not in module")
}

func TestCell(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"one\nparagraph\n\nanother", "one paragraph<br>another"},
		{"a | b and `c | d`", `a \| b and ` + "`c \\| d`"},
		{"<data-dir>/x, 2*N, `<kept>`", "&lt;data-dir>/x, 2\\*N, `<kept>`"},
		{"snake_case and _emphasis_", "snake_case and \\_emphasis\\_"},
		{"forms:\n  grpc://host   gRPC\n  http://host   HTTP\nend", "forms:<br>`grpc://host   gRPC`<br>`http://host   HTTP`<br>end"},
		{"list:\n  - one\n  - two", "list:<br>• one<br>• two"},
		{"a lone ` quote", "a lone \\` quote"},
	} {
		assert.Equal(t, tc.want, Cell(tc.in), tc.in)
	}
}

func TestFlagsTable(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Int("workers", 4, "how many | at most")
	fs.String("config", "", "YAML `file`")
	fs.Bool("debug", false, "say more")
	fs.StringArray("replay", nil, "files")
	fs.Duration("wait", 0, "how long (default 5s)")
	_, err := FlagsTable(fs, nil)
	assert.ErrorContains(t, err, "--replay: a flag of type stringArray needs FlagDoc.Arg")
	got, err := FlagsTable(fs, map[string]FlagDoc{
		"replay":  {Arg: "FILE"},
		"config":  {More: "See [config](config.md)."},
		"workers": {Arg: "N", YAML: "aggregator.linkWorkers"},
		"wait":    {YAML: "window"},
	})
	require.NoError(t, err)
	assert.Equal(t, `| flag | value | default | YAML key | description |
| --- | --- | --- | --- | --- |
| `+"`--config`"+` | file |  |  | YAML file. See [config](config.md). |
| `+"`--debug`"+` | bool |  |  | say more |
| `+"`--replay`"+` | FILE |  |  | files |
| `+"`--wait`"+` | duration |  | [`+"`window`"+`](config.md#top-level-keys) | how long (default 5s) |
| `+"`--workers`"+` | N | `+"`4`"+` | [`+"`aggregator.linkWorkers`"+`](config.md#aggregator) | how many \| at most |
`, got)
}

func TestMetrics(t *testing.T) {
	root := writeTree(t, map[string]string{
		"go.mod": "module example.com/m\n",
		"a/a.go": `package a

func register(meter, m, mp any) {
	meter.Counter("kelemetry.a.events", "Events, " + "by result.", "{event}")
	meter.Gauge("kelemetry.a.depth", "Queued.", "{event}", nil)
	m.Int64Counter("kelemetry.a.raw", metric.WithDescription("Raw calls."), metric.WithUnit("{call}"))
	m.Int64Counter("kelemetry.a.raw") // its fallback, undescribed
	meter.Histogram(name, "dynamic", "s")
	meter.Counter("x") // not an instrument (too few arguments)
}
`,
		"b/b.go": `package b

func register(meter any) {
	meter.Counter("kelemetry.a.events", "Events, by result.", "{event}")
	meter.UpDownCounter("kelemetry.b.bytes", "Bytes in flight.", "By")
}
`,
	})
	m, err := LoadModule(root)
	require.NoError(t, err)
	metrics, dynamic, err := m.Metrics()
	require.NoError(t, err)
	assert.Equal(t, []Metric{
		{Name: "kelemetry.a.depth", Prometheus: "kelemetry_a_depth", Kind: "gauge", Unit: "{event}", Description: "Queued.", Packages: []string{"a"}},
		{Name: "kelemetry.a.events", Prometheus: "kelemetry_a_events_total", Kind: "counter", Unit: "{event}", Description: "Events, by result.", Packages: []string{"a", "b"}},
		{Name: "kelemetry.a.raw", Prometheus: "kelemetry_a_raw_total", Kind: "counter", Unit: "{call}", Description: "Raw calls.", Packages: []string{"a"}},
		{Name: "kelemetry.b.bytes", Prometheus: "kelemetry_b_bytes", Kind: "updowncounter", Unit: "By", Description: "Bytes in flight.", Packages: []string{"b"}},
	}, metrics)
	assert.Equal(t, []string{"a/a.go:8"}, dynamic)
}

func TestParseCRD(t *testing.T) {
	crd, err := ParseCRD([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: example.io
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
    - name: v1
      served: true
      storage: true
      additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: integer, format: int32, minimum: 1, description: How big.}
                parts:
                  type: array
                  maxItems: 3
                  items:
                    type: object
                    properties:
                      name: {type: string, enum: [a, b]}
                    x-kubernetes-validations:
                      - {rule: "self.name != ''", message: name is required}
                labels: {type: object, additionalProperties: {type: string}}
`))
	require.NoError(t, err)
	require.Len(t, crd.Versions, 1)
	v := crd.Versions[0]
	assert.Equal(t, [][2]string{{"Size", ".spec.size"}}, v.PrinterColumns)
	assert.Equal(t, []CRDField{
		{Path: "spec", Type: "object"},
		{Path: "spec.size", Type: "integer (int32)", Required: true, Constraints: []string{"≥ 1"}, Description: "How big."},
		{Path: "spec.parts", Type: "array of object", Constraints: []string{"≤ 3 items", "each item: name is required"}},
		{Path: "spec.parts[].name", Type: "string", Constraints: []string{`one of "a", "b"`}},
		{Path: "spec.labels", Type: "map of string"},
	}, v.Fields)

	_, err = ParseCRD([]byte("kind: Deployment\n"))
	assert.ErrorContains(t, err, `kind "Deployment"`)
}

func TestGolden(t *testing.T) {
	assert.Empty(t, FirstDiff("a\nb\n", "a\nb\n"))
	assert.Equal(t, "line 2:\n  committed: \"b\"\n  generated: \"c\"\n(committed 3 lines, generated 3)", FirstDiff("a\nb\n", "a\nc\n"))
	assert.Contains(t, FirstDiff("a\n", "a\nmore\n"), "line 2:")

	page := filepath.Join(t.TempDir(), "page.md")
	t.Setenv(UpdateEnv, "1")
	Golden(t, page, "generated\n")
	data, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, "generated\n", string(data), "with the variable set, the page is written")

	t.Setenv(UpdateEnv, "")
	var stale recorder
	Golden(&stale, page, "generated, changed\n")
	assert.True(t, stale.failed, "a stale page fails")
	assert.Contains(t, strings.Join(stale.logs, "\n"), "KELEMETRY_UPDATE_DOCS=1 go test ./internal/docgen -run '^TestPage$'")
	var current recorder
	Golden(&current, page, "generated\n")
	assert.False(t, current.failed, "a current page passes")
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
	logs   []string
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "TestPage" }
func (r *recorder) Errorf(format string, args ...any) {
	r.failed = true
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
}

func (r *recorder) Logf(string, ...any) {}
