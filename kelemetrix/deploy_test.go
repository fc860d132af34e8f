package kelemetrix

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/dashboards"
	k8saudit "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// TestDashboardMetricNames: every metric the dashboard's PromQL names is one the code exports for
// the default config (ExportedNames, or the histogram series _bucket, _sum, _count of one), or
// one of kelemetrix's own metrics as /metrics shows them; the labels it groups by are the
// metric's.
func TestDashboardMetricNames(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "helm", "kelemetry", "files", "dashboards", "kelemetrix.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	queries := dashboards.Exprs(dash)
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}

	cfg := loadDefault(t)
	labels := map[string][]string{} // exported series name -> its labels
	for _, m := range cfg.Metrics {
		name := ExportedName(m)
		ls := slices.Clone(m.Labels)
		if m.Kind == kindHistogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				labels[name+s] = append(ls, "le")
			}
			continue
		}
		labels[name] = ls
	}
	// kelemetrix's own metrics, as the exposition names them.
	prom := newPromProvider(t)
	cfg.Metrics[0].MaxSeries = 1
	p, err := New(cfg, prom.settings())
	if err != nil {
		t.Fatal(err)
	}
	p.Handle(context.Background(), "c", readFixture(t, filepath.Join("..", "testdata", "rollout", "audit.jsonl")))
	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.ObserveAudit("c", []*auditv1.Event{{}})
	for _, f := range prom.families(t, "kelemetry_kelemetrix_") {
		labels[f] = []string{"reason", "metric"}
	}

	name := regexp.MustCompile(`\bkelemetr(?:y|ix)_[a-zA-Z0-9_]+`)
	grouped := regexp.MustCompile(`by \(([^)]*)\) \((?:rate\()?(kelemetrix_[a-zA-Z0-9_]+)`)
	used := map[string]bool{}
	for _, q := range queries {
		for _, n := range name.FindAllString(q, -1) {
			if _, ok := labels[n]; !ok {
				t.Errorf("query %q: metric %s is not exported (exported: %v)", q, n, cfg.exportedNames())
			}
			used[n] = true
		}
		for _, m := range grouped.FindAllStringSubmatch(q, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !slices.Contains(labels[m[2]], l) {
					t.Errorf("query %q: %s has no label %s", q, m[2], l)
				}
			}
		}
	}
	for _, n := range []string{"kelemetrix_requests_total", "kelemetrix_request_latency_seconds_bucket", "kelemetrix_errors_by_user_total", "kelemetrix_cache_bypassing_lists_total"} {
		if !used[n] {
			t.Errorf("the dashboard does not show %s", n)
		}
	}
}

// TestAuditPolicyKeepsReads decodes deploy/audit-policy-kelemetrix.yaml strictly into
// kube-apiserver's policy type and checks that reads are recorded at Metadata level.
func TestAuditPolicyKeepsReads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "audit-policy-kelemetrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p k8saudit.Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	levelOf := func(verb, group, resource string) k8saudit.Level {
		for _, r := range p.Rules {
			if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, verb) {
				continue
			}
			if len(r.Namespaces) > 0 {
				continue
			}
			if len(r.Resources) == 0 {
				return r.Level
			}
			for _, g := range r.Resources {
				if g.Group == group && slices.Contains(g.Resources, resource) {
					return r.Level
				}
			}
		}
		return k8saudit.LevelNone
	}
	for _, verb := range []string{"get", "list", "watch"} {
		if l := levelOf(verb, "", "pods"); l != k8saudit.LevelMetadata {
			t.Errorf("%s pods: level %s, want Metadata", verb, l)
		}
	}
	if l := levelOf("update", "apps", "deployments"); l != k8saudit.LevelRequestResponse {
		t.Errorf("update deployments: level %s, want RequestResponse (the tracer needs bodies)", l)
	}
	if l := levelOf("get", "", "secrets"); l != k8saudit.LevelMetadata {
		t.Errorf("get secrets: level %s, want Metadata", l)
	}
	for _, s := range []string{"ResponseComplete", "Panic"} {
		if slices.Contains(p.OmitStages, k8saudit.Stage(s)) {
			t.Errorf("stage %s is omitted", s)
		}
	}
}
