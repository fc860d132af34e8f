package docgen_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry/internal/dashboards"
)

// The chart's alerting rules and dashboards.
const (
	alertsPath     = "deploy/helm/kelemetry/files/alerts.yaml"
	dashboardsGlob = "deploy/helm/kelemetry/files/dashboards/*.json"
	alertsDocPath  = "docs/operations/alerts.md"
)

// The alerting rules and the dashboards name only metrics the code exports, as /metrics shows
// them (kelemetry_*, a histogram's series included; kelemetrix's are checked by kelemetrix's
// TestDashboardMetricNames), and each alert's runbook_url points at its section of
// docs/operations/alerts.md, which has a section for every alert and no other.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	metrics, _, err := loadModule(t).Metrics()
	require.NoError(t, err)
	known := map[string]bool{}
	for _, m := range metrics {
		known[m.Prometheus] = true
		if m.Kind == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Prometheus+s] = true
			}
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(root, alertsPath))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &rules))
	queries := map[string][]string{} // file -> expressions
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			queries[alertsPath] = append(queries[alertsPath], r.Expr)
			alerts = append(alerts, r.Alert)
			assert.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.NotEmpty(t, r.Annotations["description"], r.Alert)
			assert.Equal(t, "https://github.com/kelemetry/kelemetry/blob/main/"+alertsDocPath+"#"+strings.ToLower(r.Alert),
				r.Annotations["runbook_url"], r.Alert)
		}
	}
	require.Greater(t, len(alerts), 8)

	files, err := filepath.Glob(filepath.Join(root, dashboardsGlob))
	require.NoError(t, err)
	require.Len(t, files, 2, "the pipeline and kelemetrix dashboards")
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var dash any
		require.NoError(t, json.Unmarshal(data, &dash))
		qs := dashboards.Exprs(dash)
		require.NotEmpty(t, qs, f)
		rel, _ := filepath.Rel(root, f)
		queries[rel] = qs
	}

	name := regexp.MustCompile(`\bkelemetry_[a-zA-Z0-9_]+`)
	used := 0
	for file, qs := range queries {
		for _, q := range qs {
			for _, n := range name.FindAllString(q, -1) {
				used++
				assert.True(t, known[n], "%s: %s is not on /metrics: %q", file, n, q)
			}
		}
	}
	require.Greater(t, used, 30)

	doc, err := os.ReadFile(filepath.Join(root, alertsDocPath))
	require.NoError(t, err)
	var sections []string
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok && strings.HasPrefix(h, "Kelemetry") {
			sections = append(sections, h)
		}
	}
	sort.Strings(sections)
	sort.Strings(alerts)
	assert.Equal(t, alerts, sections, "%s has a section (## AlertName) for every alert", alertsDocPath)
}
