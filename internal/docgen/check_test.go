package docgen

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (path -> content; a path ending in "*" is made executable) under a new
// folder and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "*") {
			p, mode = strings.TrimSuffix(p, "*"), 0o755
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), mode))
	}
	return dir
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Try it in one minute", "try-it-in-one-minute"},
		{"What's new?", "whats-new"},
		{"`audit.queue`: the durable queue", "auditqueue-the-durable-queue"},
		{"[Linking](linking.md) and **rules**", "linking-and-rules"},
		{"A -- B", "a----b"},
		{"foo_bar and _emphasis_", "foo_bar-and-emphasis"},
		{"Ünïcode Straße 2", "ünïcode-straße-2"},
		{"HTTP API (v1)", "http-api-v1"},
	} {
		assert.Equal(t, tc.want, Slug(tc.heading), tc.heading)
	}
}

func TestAnchors(t *testing.T) {
	d := parseMarkdown("# Title\n\n## Usage\ntext\n## Usage\n\nSetext heading\n---\n\n| a |\n| --- |\n" +
		"```sh\n# not a heading\n```\n<a id=\"custom\"></a>\n## Closed ##\n")
	assert.Equal(t, map[string]bool{"title": true, "usage": true, "usage-1": true, "setext-heading": true, "custom": true, "closed": true}, d.anchors())
}

func TestLinks(t *testing.T) {
	d := parseMarkdown("See [a](a.md#x), ![img](i.png \"title\") and `[not](code.md)`.\n" +
		"[ref]: docs/r.md\n<a href=\"h.md\">h</a>\n```md\n[in block](b.md)\n```\n- item [nested [brackets]](n.md)\n")
	var got []string
	for _, l := range d.links() {
		got = append(got, l.target)
	}
	assert.Equal(t, []string{"a.md#x", "i.png", "docs/r.md", "h.md", "n.md"}, got)
}

func TestShellCommands(t *testing.T) {
	lines := shellLines("FOO=1 ./x.sh --a 'b c' # comment\n\ncd e2e && go run ./cmd/t \\\n  -v \"#not\" | grep x; echo a#b $(date)\n")
	require.Len(t, lines, 2)
	assert.Equal(t, []int{0, 2}, []int{lines[0].n, lines[1].n})
	var got [][]string
	for _, l := range lines {
		got = append(got, shellCommands(l.text)...)
	}
	assert.Equal(t, [][]string{
		{"FOO=1", "./x.sh", "--a", "b c"},
		{"cd", "e2e"}, {"go", "run", "./cmd/t", "-v", "#not"}, {"grep", "x"}, {"echo", "a#b", "$"}, {"("}, {"date"}, {")"},
	}, got)
}

// Check finds each kind of problem, and a page without problems passes.
func TestCheckFindsProblems(t *testing.T) {
	root := writeTree(t, map[string]string{
		"cmd/tool/main.go": `package main

import "flag"

func main() {
	fs := flag.NewFlagSet("tool", flag.ExitOnError)
	_ = fs.String("name", "", "a name")
	var v bool
	fs.BoolVar(&v, "verbose", false, "say more")
	_ = fs.String("out", "", "file to write")
	_ = flag.Duration("wait", 0, "how long")
}
`,
		"lib/lib.go":         "package lib\n",
		"scripts/ok.sh*":     "#!/bin/sh\n",
		"scripts/noexec.sh":  "#!/bin/sh\n",
		"testdata/in.txt":    "x\n",
		"docs/target.md":     "# Target\n\n## Its section\n",
		"docs/good.md":       goodPage,
		"docs/bad.md":        badPage,
		"docs/sub/nested.md": "[up](../target.md#its-section) [root](/docs/target.md)\n",
	})
	load := func(b []byte) error {
		if strings.Contains(string(b), "bad:") {
			return errors.New("unknown key bad")
		}
		return nil
	}
	o := CheckOptions{
		Root:        root,
		YAML:        []YAMLCheck{{Name: "config", Match: func(k, _ string) bool { return k == "audit" }, Load: load}},
		Run:         true,
		RunTimeout:  time.Minute,
		ConfigKeys:  map[string]bool{"audit": true, "audit.queue": true, "audit.queue.dir": true, "audit.forward.url": true},
		ConfigRoots: map[string]bool{"audit": true},
		NotKeys:     map[string]string{"audit.oldKey": "renamed"},
	}

	o.Files = []string{"docs/good.md", "docs/sub/nested.md"}
	r := Check(context.Background(), o)
	assert.Empty(t, r.Problems)
	// 6 links (4 + 2; the absolute URL is not one), 3 of them with an anchor; 9 commands (the
	// "(" and ")" of subshells and the assignment are not); 4 repository paths (go run's packages
	// are checked as packages, -out's file is written); 3 go run with 6 flags; the cd in a
	// subshell does not move the next line, the cd of line 4 moves its go run.
	assert.Equal(t, Report{Files: 2, Links: 6, Anchors: 3, ShellBlocks: 2, Commands: 9, Paths: 4, GoRuns: 3, Flags: 6, RunBlocks: 1, YAMLBlocks: 1, ConfigKeySpans: 2,
		NotKeysSeen: map[string]bool{"audit.oldKey": true}}, r)

	o.Files = []string{"docs/bad.md", "docs/missing.md"}
	r = Check(context.Background(), o)
	want := []string{
		`docs/bad.md:1: link "nowhere.md": docs/nowhere.md does not exist`,
		`docs/bad.md:1: link "target.md#no-such-section": docs/target.md has no heading or anchor #no-such-section`,
		`docs/bad.md:1: link "#nothing": docs/bad.md has no heading or anchor #nothing`,
		`docs/bad.md:1: link "../../outside.md" leaves the repository`,
		"docs/bad.md:3: `audit.queue.dri` is not a configuration key",
		`docs/bad.md:6: testdata/missing.txt: testdata/missing.txt does not exist`,
		`docs/bad.md:6: ./scripts/noexec.sh is not an executable file`,
		`docs/bad.md:6: go run ./cmd/tool: flag -title is not defined`,
		`docs/bad.md:6: go run ./cmd/nope: no package folder`, // once: not also as a missing path
		`docs/bad.md:6: go run ./lib: no main package`,
		`docs/bad.md:6: cd nowhere: no such folder in the repository`,
		`docs/bad.md:10: block marked docs:run failed: exit status 3`,
		`docs/bad.md:15: YAML block (config): unknown key bad`,
		`docs/bad.md:21: unknown marker docs:nope on a YAML block`,
		`docs/missing.md:0: open`,
	}
	for _, w := range want {
		found := false
		for _, p := range r.Problems {
			found = found || strings.Contains(p, w)
		}
		assert.True(t, found, "want a problem %q in:\n%s", w, strings.Join(r.Problems, "\n"))
	}
	assert.Len(t, r.Problems, len(want), strings.Join(r.Problems, "\n"))
}

const goodPage = `# Good

See [the target](target.md), [its section](target.md#its-section), [here](#good), [a folder](../testdata) and
[the web](https://example.com/x.md#y). Keys: ` + "`audit.queue.dir`, `audit.forward[].url`, `audit.oldKey`, not keys: `audit.jsonl`, `other.thing`" + `.

` + "```sh" + `
./scripts/ok.sh testdata/in.txt    # a comment naming missing/file.txt
(cd cmd && go run ./tool --name x -verbose --wait=1s -h)
go run ./cmd/tool -out testdata/new/out.txt   # -out: a file it writes
v=$(cat testdata/in.txt) && cd cmd && go run ./tool --name "$v"
` + "```" + `

<!-- docs:run -->
` + "```sh" + `
test -f testdata/in.txt && echo ran
` + "```" + `

` + "```yaml" + `
# a configuration
audit:
  queue: {dir: /data}
` + "```" + `

` + "```yaml" + `
other: not checked
` + "```" + `
`

const badPage = `[a](nowhere.md) [b](target.md#no-such-section) [c](#nothing) [d](../../outside.md)

A key that is not one: ` + "`audit.queue.dri`" + `.

` + "```sh" + `
cat testdata/missing.txt && ./scripts/noexec.sh && go run ./cmd/tool --title x && go run ./cmd/nope && go run ./lib && cd nowhere
` + "```" + `

<!-- docs:run -->
` + "```sh" + `
echo failing
exit 3
` + "```" + `

` + "```yaml" + `
audit:
  bad: 1
` + "```" + `

<!-- docs:nope -->
` + "```yaml" + `
audit: {}
` + "```" + `
`

// A block marked docs:run that does not end in time is stopped, child processes included, and
// reported.
func TestCheckRunTimeout(t *testing.T) {
	root := writeTree(t, map[string]string{
		"page.md": "<!-- docs:run -->\n```sh\nsleep 60 & wait\n```\n",
	})
	start := time.Now()
	r := Check(context.Background(), CheckOptions{Root: root, Files: []string{"page.md"}, Run: true, RunTimeout: 300 * time.Millisecond})
	assert.Less(t, time.Since(start), 20*time.Second)
	require.Len(t, r.Problems, 1)
	assert.Contains(t, r.Problems[0], "page.md:2: block marked docs:run failed")
	assert.Contains(t, r.Problems[0], "timeout 300ms")

	r = Check(context.Background(), CheckOptions{Root: root, Files: []string{"page.md"}, Run: false})
	assert.Empty(t, r.Problems)
	assert.Zero(t, r.RunBlocks, "not run without Run")
}

// CheckMetricNames finds OpenTelemetry names and names that are not on /metrics, in prose and in
// blocks, and lets a paragraph about the naming give both names.
func TestCheckMetricNames(t *testing.T) {
	root := writeTree(t, map[string]string{
		"good.md": "Watch `kelemetry_audit_webhook_rejected_total{reason=\"queue_full\"}` and\n" +
			"`kelemetry_remotelinker_duration_seconds_bucket`; kelemetrix's `kelemetrix_slow_lists_total`, `kelemetry_custom_total`.\n" +
			"Span attributes keep dots: `kelemetry.span.kind`, `kelemetry.audit.label_selector`; subjects `kelemetry.audit.*.*`.\n\n" +
			"OpenTelemetry's `kelemetry.audit.webhook.rejected` is\n`kelemetry_audit_webhook_rejected_total` on /metrics.\n\n" +
			"```sh\ncurl -s localhost:16686/metrics | grep -E '^kelemetry_audit_webhook_(rejected|requests)_total'\n```\n",
		"bad.md": "Counted in kelemetry.audit.webhook.rejected.\n\n" +
			"| registered name | scraped as |\n| --- | --- |\n| `kelemetry.store.size` | `kelemetry_store_size_bytes` |\n\n" +
			"```promql\nrate(kelemetry_audit_webhook_rejected[5m]) + kelemetry_store_sise_bytes\n```\n" +
			"`kelemetry_nothing_like_it`, `kelemetry_nope_*`, `kelemetry_remotelinker_duration_bucket`\n",
	})
	o := MetricNamesOptions{
		Root: root,
		Metrics: []Metric{
			{Name: "kelemetry.audit.webhook.rejected", Prometheus: "kelemetry_audit_webhook_rejected_total", Kind: "counter"},
			{Name: "kelemetry.audit.webhook.requests", Prometheus: "kelemetry_audit_webhook_requests_total", Kind: "counter"},
			{Name: "kelemetry.store.size", Prometheus: "kelemetry_store_size_bytes", Kind: "gauge", Unit: "By"},
			{Name: "kelemetry.remotelinker.duration", Prometheus: "kelemetry_remotelinker_duration_seconds", Kind: "histogram", Unit: "s"},
		},
		Prefix:     "kelemetry_",
		Configured: map[string]bool{"kelemetry_custom_total": true},
	}

	o.Files = []string{"good.md"}
	r := CheckMetricNames(o)
	assert.Empty(t, r.Problems)
	assert.Equal(t, 1, r.Files)
	assert.Equal(t, 6, r.MetricNames, "3 names on /metrics, an OpenTelemetry name with its name on /metrics, the start of names in a pattern")

	o.Files = []string{"bad.md", "missing.md"}
	r = CheckMetricNames(o)
	require.Len(t, r.Problems, 8, strings.Join(r.Problems, "\n"))
	assert.True(t, strings.HasPrefix(r.Problems[7], "missing.md:0: open "), r.Problems[7])
	assert.Equal(t, []string{
		// Sorted as text: line 10 before line 1.
		"bad.md:10: kelemetry_nope_ starts no name on /metrics (docs/reference/metrics.md)",
		"bad.md:10: kelemetry_nothing_like_it is not on /metrics (docs/reference/metrics.md)",
		"bad.md:10: kelemetry_remotelinker_duration_bucket is not on /metrics: it shows kelemetry_remotelinker_duration_seconds_bucket (docs/reference/metrics.md)",
		"bad.md:1: kelemetry.audit.webhook.rejected is an OpenTelemetry name: /metrics shows kelemetry_audit_webhook_rejected_total (docs/reference/metrics.md)",
		// A table that gives both names but is not about the naming.
		"bad.md:5: kelemetry.store.size is an OpenTelemetry name: /metrics shows kelemetry_store_size_bytes (docs/reference/metrics.md)",
		"bad.md:8: kelemetry_audit_webhook_rejected is not on /metrics: it shows kelemetry_audit_webhook_rejected_total (docs/reference/metrics.md)",
		"bad.md:8: kelemetry_store_sise_bytes is not on /metrics: kelemetry_store_size_bytes? (docs/reference/metrics.md)",
	}, r.Problems[:7])
}
