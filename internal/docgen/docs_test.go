package docgen_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/internal/docgen"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/linkrule"
)

// root is the repository root, from this package's folder.
const root = "../.."

func loadModule(t *testing.T) *docgen.Module {
	t.Helper()
	m, err := docgen.LoadModule(root)
	require.NoError(t, err)
	return m
}

// docs/reference/config.md is the configuration reference generated from the Config types
// (KELEMETRY_UPDATE_DOCS=1 rewrites it).
func TestConfigReference(t *testing.T) {
	got, err := docgen.ConfigPage(loadModule(t))
	require.NoError(t, err)
	docgen.Golden(t, filepath.Join(root, docgen.ConfigPagePath), got)
}

// docs/reference/metrics.md lists the metrics the code registers (KELEMETRY_UPDATE_DOCS=1
// rewrites it).
func TestMetricsReference(t *testing.T) {
	got, err := docgen.MetricsPage(loadModule(t))
	require.NoError(t, err)
	docgen.Golden(t, filepath.Join(root, docgen.MetricsPagePath), got)
}

// docs/reference/linkrule-crd.md documents the LinkRule CRD (KELEMETRY_UPDATE_DOCS=1 rewrites it).
func TestLinkRuleCRDReference(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join(root, docgen.CRDPath))
	require.NoError(t, err)
	got, err := docgen.CRDPage(loadModule(t), crd)
	require.NoError(t, err)
	docgen.Golden(t, filepath.Join(root, docgen.CRDPagePath), got)
}

// The configuration reference has every key that LoadConfig accepts and only those: each key
// path, set in a file, loads (a key of a list item or map value inside its list or map), and a
// key next to them that is not in the reference is refused.
func TestConfigFieldsAreTheKeysLoadConfigAccepts(t *testing.T) {
	fields, err := loadModule(t).ConfigFields("github.com/kelemetry/kelemetry", "Config", "yaml")
	require.NoError(t, err)
	require.Greater(t, len(fields), 300, "the configuration has hundreds of keys")
	byPath := map[string]docgen.Field{}
	for _, f := range fields {
		byPath[f.Path] = f
	}
	for _, want := range []struct{ path, typ string }{
		{"audit.queue.maxDiskBytes", "integer"},
		{"audit.queue.durable", "bool"},
		{"window", "duration"},
		{"clusters", "list of object"},
		{"clusters[].qps", "number"},
		{"audit.forward[].url", "string"},
		{"httpAuth.proxy.allowedNames", "list of string"},
		{"otlp.headers", "map of string"},
		{"kelemetrix.metrics[].tagFilters[].oneOf", "list of string"},
		{"query.causalRules[].controllers", "list of string"},
	} {
		f, ok := byPath[want.path]
		if assert.True(t, ok, want.path) {
			assert.Equal(t, want.typ, f.Type, want.path)
		}
	}
	assert.NotContains(t, byPath, "audit.webhook.maxFutureSkew", `yaml:"-" fields are not keys`)
	assert.NotContains(t, byPath, "audit.maxfutureskew")
	assert.Contains(t, byPath["audit.queue.maxDiskBytes"].Doc, "bounds the durable queue's log on disk", "the field's doc comment")

	dir := t.TempDir()
	for _, f := range fields {
		if f.Object || strings.Contains(f.Path, "<name>") {
			continue
		}
		doc := yamlFor(f.Path, f.Type)
		file := filepath.Join(dir, "c.yaml")
		require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
		_, err := kelemetry.LoadConfig(file)
		assert.NoError(t, err, "%s:\n%s", f.Path, doc)

		bad := yamlFor(f.Path+"Typo", f.Type)
		require.NoError(t, os.WriteFile(file, []byte(bad), 0o644))
		_, err = kelemetry.LoadConfig(file)
		assert.Error(t, err, "a key beside %s that the reference does not have", f.Path)
	}
}

// yamlFor is a YAML document that sets the key path to a value of the type, with a list of one
// item for each "[]" of the path.
func yamlFor(path, typ string) string {
	parts := strings.Split(path, ".")
	var build func(i int) any
	build = func(i int) any {
		if i == len(parts) {
			return sample(typ)
		}
		key, list := strings.CutSuffix(parts[i], "[]")
		inner := build(i + 1)
		if list {
			inner = []any{inner}
		}
		return map[string]any{key: inner}
	}
	out, err := yaml.Marshal(build(0))
	if err != nil {
		panic(err)
	}
	return string(out)
}

// sample is a value of a type of the reference.
func sample(typ string) any {
	if elem, ok := strings.CutPrefix(typ, "list of "); ok {
		return []any{sample(elem)}
	}
	if elem, ok := strings.CutPrefix(typ, "map of "); ok {
		return map[string]any{"k": sample(elem)}
	}
	switch typ {
	case "bool":
		return true
	case "integer":
		return 1
	case "number":
		return 1.5
	case "duration":
		return "1s"
	}
	return "x"
}

// The metrics reference finds the instruments of every package, with their description, unit
// and the name Prometheus shows, and the calls it cannot document are the wrappers of package
// telemetry and kelemetrix's metrics defined by configuration, nothing else.
func TestMetricsFound(t *testing.T) {
	metrics, dynamic, err := loadModule(t).Metrics()
	require.NoError(t, err)
	require.Greater(t, len(metrics), 80)
	byName := map[string]docgen.Metric{}
	for _, m := range metrics {
		byName[m.Name] = m
	}
	for _, want := range []docgen.Metric{
		{Name: "kelemetry.audit.webhook.requests", Prometheus: "kelemetry_audit_webhook_requests_total", Kind: "counter", Unit: "{request}", Description: "Audit webhook requests, by HTTP status code.", Packages: []string{"audit/webhook"}},
		{Name: "kelemetry.remotelinker.duration", Prometheus: "kelemetry_remotelinker_duration_seconds", Kind: "histogram", Unit: "s", Description: "Time from sending a link job to its result, by linker.", Packages: []string{"remotelinker"}},
		{Name: "kelemetry.listener.connections", Prometheus: "kelemetry_listener_connections", Kind: "updowncounter", Unit: "{connection}", Description: "Connections open on a listener, by listener.", Packages: []string{"httpserver"}},
		{Name: "kelemetry.store.size", Prometheus: "kelemetry_store_size_bytes", Kind: "gauge", Unit: "By", Description: "Disk space used by the store: every file in its folder, as du counts it.", Packages: []string{"store/pebble"}},
	} {
		assert.Equal(t, want, byName[want.Name])
	}
	// Described twice (the raw OpenTelemetry call and its no-op fallback): the described one.
	assert.Contains(t, byName["kelemetry.http.auth.rejected"].Description, "answered 401")

	var dirs []string
	for _, d := range dynamic {
		dirs = append(dirs, filepath.Dir(d))
	}
	sort.Strings(dirs)
	assert.Subset(t, []string{"kelemetrix", "internal/instrument"}, dirs, "instruments created with a name that is not a constant: %v", dynamic)
	assert.Contains(t, dirs, "kelemetrix")
}

// The docs check: links and anchors of README.md, the community files and docs/ resolve, the
// shell blocks name paths, packages and flags that exist, the blocks marked docs:run run, and the
// YAML blocks of a configuration load.
func TestDocs(t *testing.T) {
	m := loadModule(t)
	fields, err := m.ConfigFields(m.Path, "Config", "yaml")
	require.NoError(t, err)
	keys, roots, top := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, f := range fields {
		p := strings.ReplaceAll(f.Path, "[]", "")
		keys[p] = true
		if !strings.ContainsAny(f.Path, ".[") {
			top[f.Path] = true
			if f.Object {
				roots[f.Path] = true
			}
		}
	}
	kx, err := m.ConfigFields(m.Path+"/kelemetrix", "Config", "yaml")
	require.NoError(t, err)
	kxTop := map[string]bool{}
	for _, f := range kx {
		if !strings.ContainsAny(f.Path, ".[") {
			kxTop[f.Path] = true
		}
	}
	for k := range kxTop {
		require.False(t, top[k], "a kelemetrix key %q is also a top-level key of the configuration: the YAML blocks would be ambiguous", k)
	}

	files := docFiles(t)
	report := docgen.Check(context.Background(), docgen.CheckOptions{
		Root:  root,
		Files: files,
		YAML: []docgen.YAMLCheck{
			{Name: "the all-in-one's configuration", Match: func(k, _ string) bool { return top[k] }, Load: loadConfig(t)},
			{Name: "a kelemetrix configuration", Match: func(k, _ string) bool { return kxTop[k] }, Load: func(b []byte) error {
				_, err := kelemetrix.ParseConfig(b)
				return err
			}},
			{Name: "a LinkRule", Match: func(k, body string) bool { return k == "apiVersion" && strings.Contains(body, "kind: LinkRule") }, Load: loadLinkRules},
			{Name: "values of the Helm chart", Marker: "docs:helm-values", Load: helmValues(t, loadConfig(t))},
		},
		Run:         !testing.Short(),
		RunTimeout:  10 * time.Minute, // a first go run compiles the all-in-one
		ConfigKeys:  keys,
		ConfigRoots: roots,
		NotKeys: map[string]string{
			"aggregator.window":    "the key before it moved to the top-level window (upgrade notes)",
			"linkRules.installCRD": "a value of the Helm chart",
			"otlp.port":            "a value of the Helm chart",
			"otlpLogs.format":      "a value of the Helm chart",
			"memory.max":           "cgroup v2's memory limit file",
		},
		FormerKeys: map[string]bool{"CHANGELOG.md": true},
	})
	for _, p := range report.Problems {
		t.Error(p)
	}
	// Not vacuous: what the documentation holds today, with room to shrink.
	assert.GreaterOrEqual(t, report.Files, 35, "Markdown files")
	assert.Greater(t, report.Links, 150, "relative links")
	assert.Greater(t, report.Anchors, 5, "#anchors")
	assert.Greater(t, report.ShellBlocks, 15, "shell blocks")
	assert.Greater(t, report.Commands, 40, "shell commands")
	assert.Greater(t, report.Paths, 15, "repository paths in shell blocks")
	assert.Greater(t, report.GoRuns, 8, "go run commands")
	assert.Greater(t, report.Flags, 12, "flags of go run commands")
	assert.GreaterOrEqual(t, report.YAMLBlocks, 9, "YAML blocks loaded")
	assert.Greater(t, report.ConfigKeySpans, 60, "configuration keys named in prose")
	if !testing.Short() {
		assert.GreaterOrEqual(t, report.RunBlocks, 1, "blocks marked docs:run")
	}
	assert.Len(t, report.NotKeysSeen, 4, "every entry of NotKeys is still needed")
	t.Logf("%d files, %d links (%d anchors), %d shell blocks (%d commands, %d paths, %d go run with %d flags, %d run), %d YAML blocks, %d configuration keys in prose",
		report.Files, report.Links, report.Anchors, report.ShellBlocks, report.Commands, report.Paths, report.GoRuns, report.Flags, report.RunBlocks, report.YAMLBlocks, report.ConfigKeySpans)
}

// The documentation names the metrics of the code as /metrics shows them
// (kelemetry_audit_webhook_rejected_total), not by their OpenTelemetry names
// (kelemetry.audit.webhook.rejected), and the kelemetry_... names it gives are on /metrics: those
// of the metrics reference, and the metrics that the repository's kelemetrix configuration
// defines. kelemetrix's metrics are named by its configuration, kelemetrix_... in the repository
// (deploy/kelemetrix.yaml, docs/sdk/kelemetrix.md): they are not kelemetry_... names, and one
// that is is allowed when deploy/kelemetrix.yaml defines it. The metrics reference gives both
// names of each metric and CHANGELOG.md the names of their time: they are not checked.
func TestDocsNameMetricsAsOnMetrics(t *testing.T) {
	metrics, _, err := loadModule(t).Metrics()
	require.NoError(t, err)
	require.Greater(t, len(metrics), 80)
	const otelPrefix, prefix = "kelemetry.", "kelemetry_"
	for _, m := range metrics {
		require.True(t, strings.HasPrefix(m.Name, otelPrefix) && strings.HasPrefix(m.Prometheus, prefix),
			"%s (%s): the check knows the metrics by the prefixes %q and %q", m.Name, m.Prometheus, otelPrefix, prefix)
	}

	data, err := os.ReadFile(filepath.Join(root, "deploy/kelemetrix.yaml"))
	require.NoError(t, err)
	kx, err := kelemetrix.ParseConfig(data)
	require.NoError(t, err)
	require.NotEmpty(t, kx.Metrics)
	configured := map[string]bool{}
	for _, mc := range kx.Metrics {
		name := kelemetrix.ExportedName(mc)
		configured[name] = true
		if mc.Kind == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				configured[name+s] = true
			}
		}
	}

	notChecked := map[string]string{
		docgen.MetricsPagePath: "the metrics reference: both names of every metric",
		"CHANGELOG.md":         "history: the names of their time",
	}
	var files []string
	for _, f := range docFiles(t) {
		if _, ok := notChecked[f]; !ok {
			files = append(files, f)
		}
	}
	require.Len(t, files, len(docFiles(t))-len(notChecked), "every file of notChecked is a file of the docs")

	r := docgen.CheckMetricNames(docgen.MetricNamesOptions{Root: root, Files: files, Metrics: metrics, Prefix: prefix, Configured: configured})
	for _, p := range r.Problems {
		t.Error(p)
	}
	// Not vacuous: what the documentation holds today, with room to shrink.
	assert.Equal(t, len(files), r.Files, "Markdown files read")
	assert.Greater(t, r.MetricNames, 150, "metric names")
	t.Logf("%d files, %d metric names", r.Files, r.MetricNames)
}

// docFiles are the Markdown files the check reads: README.md, the community files and
// docs/**/*.md.
func docFiles(t *testing.T) []string {
	files := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	require.NoError(t, err)
	return files
}

// loadConfig loads a YAML block with kelemetry.LoadConfig (unknown keys are errors).
func loadConfig(t *testing.T) func([]byte) error {
	dir := t.TempDir()
	return func(b []byte) error {
		file := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return err
		}
		_, err := kelemetry.LoadConfig(file)
		return err
	}
}

// loadLinkRules parses and compiles the LinkRules of a block.
func loadLinkRules(b []byte) error {
	rules, err := linkrule.ParseRules(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if len(rules) == 0 {
		return errors.New("no LinkRule")
	}
	for _, r := range rules {
		if _, err := linkrule.Compile(r, "docs", linkrule.CompileOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// helmValues checks a block of Helm values: its top-level keys are values of the chart
// (deploy/helm/kelemetry/values.yaml), and its config value loads as the all-in-one's
// configuration.
func helmValues(t *testing.T, load func([]byte) error) func([]byte) error {
	data, err := os.ReadFile(filepath.Join(root, "deploy/helm/kelemetry/values.yaml"))
	require.NoError(t, err)
	var chart map[string]any
	require.NoError(t, yaml.Unmarshal(data, &chart))
	return func(b []byte) error {
		var values map[string]yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&values); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		var errs []error
		for k, v := range values {
			if _, ok := chart[k]; !ok {
				errs = append(errs, fmt.Errorf("%s is not a value of the chart", k))
			}
			if k == "config" {
				out, err := yaml.Marshal(&v)
				if err != nil {
					return err
				}
				if err := load(out); err != nil {
					errs = append(errs, fmt.Errorf("config: %w", err))
				}
			}
		}
		return errors.Join(errs...)
	}
}
