package e2e_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kelemetry/kelemetry/e2e/bins"
)

// The chart's alerting rules, their unit tests and its dashboards.
const (
	alertRules     = "../deploy/helm/kelemetry/files/alerts.yaml"
	alertRuleTests = "../deploy/monitoring/alerts-test.yaml"
	dashboardsGlob = "../deploy/helm/kelemetry/files/dashboards/*.json"
)

// promtool runs the promtool of the binary cache with args and returns its combined output.
func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(dir, bins.Promtool), args...).CombinedOutput()
	return string(out), err
}

// TestAlertRules checks the rule file and runs its unit tests with promtool (Prometheus' own
// evaluation of every alert: when it fires, when it does not, its labels and text), and shows
// that the tests can fail: with one alert's threshold changed, promtool test rules fails.
func TestAlertRules(t *testing.T) {
	needEnv(t)
	if out, err := promtool(t, "check", "rules", alertRules); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := promtool(t, "test", "rules", alertRuleTests); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	// A copy whose queue alert fires at 95% instead of 80%: the tests must catch it.
	dir := t.TempDir()
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(rules), "(kelemetry_audit_queue_bytes / kelemetry_audit_queue_max_bytes) > 0.8", "(kelemetry_audit_queue_bytes / kelemetry_audit_queue_max_bytes) > 0.95", 1)
	if broken == string(rules) {
		t.Fatal("the queue alert's threshold is not where this test changes it")
	}
	tests, err := os.ReadFile(alertRuleTests)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "alerts.yaml"), broken)
	mustWrite(t, filepath.Join(dir, "tests.yaml"), strings.Replace(string(tests), "../helm/kelemetry/files/alerts.yaml", "alerts.yaml", 1))
	out, err := promtool(t, "test", "rules", filepath.Join(dir, "tests.yaml"))
	if err == nil || !strings.Contains(out, "KelemetryAuditQueueNearFull") {
		t.Fatalf("promtool test rules passed a broken threshold (err %v):\n%s", err, out)
	}
}

// dashboardDefaults are the values the dashboards' variables take for the checks: their
// constants' defaults, All for the others, Grafana's rate interval.
var dashboardDefaults = map[string]string{
	"$__rate_interval": "5m", "$cluster_label": "cluster", "$selector": `job=~".+"`,
	"$cluster": ".*", "$job": ".+", "$instance": ".+", "$clusterName": ".*",
}

// TestDashboardQueries parses every query of the dashboards with promtool (with their variables
// at their defaults), and checks that the labels the rules' and the panels' queries group by
// or match on are labels of those metrics on a real all-in-one's /metrics (where the metric has
// series at start; counters are exported at 0 from the start with their known label values).
func TestDashboardQueries(t *testing.T) {
	needEnv(t)
	files, err := filepath.Glob(dashboardsGlob)
	if err != nil || len(files) != 2 {
		t.Fatalf("dashboards %v: %v", files, err)
	}
	var queries []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dash any
		if err := json.Unmarshal(data, &dash); err != nil {
			t.Fatal(err)
		}
		for _, q := range dashboardExprs(dash) {
			// Variables are replaced longest name first ($clusterName before $cluster).
			names := make([]string, 0, len(dashboardDefaults))
			for n := range dashboardDefaults {
				names = append(names, n)
			}
			slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
			for _, n := range names {
				q = strings.ReplaceAll(q, n, dashboardDefaults[n])
			}
			if rest, ok := strings.CutPrefix(q, "label_values("); ok {
				// label_values(selector, label): the selector must parse.
				q = rest[:strings.LastIndex(rest, ",")]
			}
			if out, err := promtool(t, "--experimental", "promql", "format", q); err != nil {
				t.Errorf("%s: %q does not parse: %v\n%s", filepath.Base(f), q, err, out)
			}
			queries = append(queries, q)
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			queries = append(queries, r.Expr)
		}
	}

	labels := scrapeLabels(t, api.BaseURL+"/metrics")
	// Labels the scrape adds, and the dashboards' selection of targets.
	target := map[string]bool{"job": true, "instance": true, "namespace": true, "cluster": true, "le": true}
	matcher := regexp.MustCompile(`(kelemetry_[a-z0-9_]+)\{([^}]*)\}`)
	grouped := regexp.MustCompile(`by \(([^)]*)\) \((?:rate\(|increase\()?(kelemetry_[a-z0-9_]+)`)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	checked := 0
	check := func(q, metric, l string) {
		have, ok := labels[metric]
		if !ok || target[l] {
			return
		}
		checked++
		if !have[l] {
			t.Errorf("%q: %s has no label %s on /metrics (it has %v)", q, metric, l, have)
		}
	}
	for _, q := range queries {
		for _, m := range matcher.FindAllStringSubmatch(q, -1) {
			for _, l := range label.FindAllStringSubmatch(m[2], -1) {
				check(q, m[1], l[1])
			}
		}
		for _, m := range grouped.FindAllStringSubmatch(q, -1) {
			for _, l := range strings.Split(m[1], ",") {
				check(q, m[2], strings.TrimSpace(l))
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d labels checked against /metrics", checked)
	}
}

// dashboardExprs returns the panels' "expr" and the variables' "definition" strings.
func dashboardExprs(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, dashboardExprs(val)...)
		}
	case []any:
		for _, val := range x {
			out = append(out, dashboardExprs(val)...)
		}
	}
	return out
}

// scrapeLabels reads a Prometheus text exposition and returns each series name's label names.
func scrapeLabels(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]map[string]bool{}
	series := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	pair := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := series.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		for _, p := range pair.FindAllStringSubmatch(m[2], -1) {
			out[m[1]][p[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 20 {
		t.Fatalf("%d series names on %s", len(out), url)
	}
	return out
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
