package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden renders in testdata/golden")

const chartDir = "../../helm/kelemetry"

// rel is the release of the default render (allinone.yaml).
var rel = Release{Name: "kelemetry", Namespace: "kelemetry"}

// renderCase is a value set rendered, linted and kept as a golden file, for its own release: the
// end-to-end test (e2e/chart_test.go) applies the golden renders side by side.
type renderCase struct {
	name string
	rel  Release
	vals map[string]any
}

var cases = []renderCase{
	{"allinone", rel, nil},
	{"allinone-secured", Release{Name: "kelemetry-secured", Namespace: "kelemetry-secured"}, map[string]any{
		"cluster": "prod-1",
		"image":   map[string]any{"repository": "registry.example/kelemetry", "tag": "v1.0.0"},
		"webhook": map[string]any{"tlsSecret": "kelemetry-webhook-tls", "clientCASecret": "kube-apiserver-client-ca",
			"service": map[string]any{"clusterIP": "10.96.0.50"}},
		"api":            map[string]any{"tlsSecret": "kelemetry-api-tls", "tokenSecret": "kelemetry-api-tokens"},
		"networkPolicy":  map[string]any{"enabled": true, "webhookFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}}},
		"serviceMonitor": map[string]any{"enabled": true, "bearerTokenSecret": map[string]any{"name": "kelemetry-api-tokens", "key": "prometheus"}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"},
			"disabled": []any{"KelemetryOTLPExportFailing", "KelemetryOTLPSpansDropped"}, "alertLabels": map[string]any{"team": "platform"}},
		"dashboards":      map[string]any{"enabled": true, "clusterLabel": "k8s_cluster", "annotations": map[string]any{"grafana_folder": "Kelemetry"}},
		"apiserverTraces": map[string]any{"enabled": true},
	}},
	// The knobs every chart has: names, pod labels and scheduling, environment and arguments, an
	// existing claim, an Ingress and an HTTPRoute.
	{"allinone-knobs", Release{Name: "kelemetry-knobs", Namespace: "observability"}, knobVals},
	// The managed-cluster recipe of docs/install/managed-clusters.md: a collector container writes
	// the cloud's audit log into a folder shared with Kelemetry, which follows it.
	{"allinone-managed", Release{Name: "kelemetry-managed", Namespace: "kelemetry-managed"}, managedVals},
	// The same over OTLP logs: an OpenTelemetry Collector (deploy/collector/) sends the cloud's
	// audit records to the OTLP receiver, with the webhook's TLS and token.
	{"allinone-managed-otlp", Release{Name: "kelemetry-otlp", Namespace: "kelemetry-otlp"}, managedOTLPVals},
	{"scaled", Release{Name: "kelemetry-scaled", Namespace: "kelemetry-scaled"}, map[string]any{
		"mode":    "scaled",
		"cluster": "prod-1",
		"scaled": map[string]any{
			"ingest": map[string]any{"replicas": 3},
			"query":  map[string]any{"replicas": 2},
			"jaeger": map[string]any{"endpoint": "jaeger:17271", "otlpEndpoint": "jaeger:4317"},
			"nats":   map[string]any{"urls": []any{"nats://nats:4222"}, "stream": "KELEMETRY_AUDIT"},
		},
	}},
}

// knobVals set every general-purpose knob of the chart.
var knobVals = map[string]any{
	"podLabels":         map[string]any{"team": "platform"},
	"priorityClassName": "system-cluster-critical",
	"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
		"whenUnsatisfiable": "ScheduleAnyway", "labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "kelemetry"}}}},
	"extraEnv":     []any{map[string]any{"name": "GOGC", "value": "50"}, map[string]any{"name": "OTEL_RESOURCE_ATTRIBUTES", "value": "deployment.environment=prod"}},
	"extraEnvFrom": []any{map[string]any{"secretRef": map[string]any{"name": "kelemetry-env"}}},
	"extraArgs":    []any{"--set=query.maxConcurrent=8"},
	"allinone": map[string]any{"persistence": map[string]any{"existingClaim": "kelemetry-data",
		"retentionPolicy": map[string]any{"whenDeleted": "Delete", "whenScaled": "Retain"}}},
	"ingress": map[string]any{"enabled": true, "className": "nginx",
		"hosts": []any{map[string]any{"host": "kelemetry.example.com"}},
		"tls":   []any{map[string]any{"secretName": "kelemetry-tls", "hosts": []any{"kelemetry.example.com"}}}},
	"httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public", "namespace": "gateway-system"}},
		"hostnames": []any{"kelemetry.example.com"}},
}

// The PrometheusRule holds every alert of files/alerts.yaml but the disabled ones, with the extra
// labels; each dashboard of files/dashboards is a ConfigMap the Grafana sidecar finds, its
// cluster label and target selector set from the values.
func TestMonitoringRender(t *testing.T) {
	var file struct {
		Groups []struct {
			Name  string           `json:"name"`
			Rules []map[string]any `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &file))
	var want []any
	for _, r := range file.Groups[0].Rules {
		if a := r["alert"]; a != "KelemetryOTLPExportFailing" && a != "KelemetryOTLPSpansDropped" {
			want = append(want, a)
		}
	}
	require.Greater(t, len(want), 8)

	objs := docs(t, render(t, caseNamed(t, "allinone-secured")).Manifest)
	pr := find(t, objs, "PrometheusRule", "kelemetry-secured")
	assert.Equal(t, "prometheus", path(pr, "metadata", "labels", "release"))
	var got []any
	for _, r := range path(pr, "spec", "groups", 0, "rules").([]any) {
		got = append(got, path(r, "alert"))
		assert.Equal(t, "platform", path(r, "labels", "team"), "%v", path(r, "alert"))
		assert.NotEmpty(t, path(r, "labels", "severity"), "%v keeps its severity", path(r, "alert"))
	}
	assert.Equal(t, want, got)

	for _, name := range []string{"kelemetry-pipeline", "kelemetrix"} {
		cm := find(t, objs, "ConfigMap", "kelemetry-secured-dashboard-"+name)
		assert.Equal(t, "1", path(cm, "metadata", "labels", "grafana_dashboard"))
		assert.Equal(t, "Kelemetry", path(cm, "metadata", "annotations", "grafana_folder"))
		var dash map[string]any
		require.NoError(t, json.Unmarshal([]byte(path(cm, "data", name+".json").(string)), &dash))
		constants := map[string]any{}
		for _, v := range path(dash, "templating", "list").([]any) {
			if path(v, "type") == "constant" {
				constants[path(v, "name").(string)] = path(v, "query")
			}
		}
		assert.Equal(t, map[string]any{"cluster_label": "k8s_cluster",
			"selector": `namespace="kelemetry-secured", job=~"kelemetry-secured.*"`}, constants, name)
		assert.NotEmpty(t, path(dash, "panels"))
	}
	for _, o := range docs(t, render(t, caseNamed(t, "allinone")).Manifest) {
		assert.NotEqual(t, "PrometheusRule", o["kind"], "off by default")
		assert.NotContains(t, path(o, "metadata", "name"), "dashboard", "off by default")
	}
}

// A PodDisruptionBudget only for workloads of several replicas: scaled ingest and query (the
// Event watcher has one).
func TestPodDisruptionBudgets(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "scaled")).Manifest)
	var pdbs []string
	for _, o := range objs {
		if o["kind"] == "PodDisruptionBudget" {
			pdbs = append(pdbs, path(o, "metadata", "name").(string))
		}
	}
	assert.ElementsMatch(t, []string{"kelemetry-scaled-ingest", "kelemetry-scaled-query"}, pdbs)
	one := caseNamed(t, "scaled")
	one.vals = map[string]any{"mode": "scaled", "scaled": map[string]any{"query": map[string]any{"replicas": 1},
		"jaeger": map[string]any{"endpoint": "jaeger:17271", "otlpEndpoint": "jaeger:4317"}}}
	objs = docs(t, render(t, one).Manifest)
	pdbs = nil
	for _, o := range objs {
		if o["kind"] == "PodDisruptionBudget" {
			pdbs = append(pdbs, path(o, "metadata", "name").(string))
		}
	}
	assert.Equal(t, []string{"kelemetry-scaled-ingest"}, pdbs, "the default 2 ingest replicas, 1 query replica")
}

// The knobs reach the objects: names, labels, scheduling, environment, arguments, the existing
// claim instead of the claim template, and the Ingress and HTTPRoute to the API service.
func TestKnobsRender(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "allinone-knobs")).Manifest)
	sts := find(t, objs, "StatefulSet", "kelemetry-knobs")
	pod := path(sts, "spec", "template", "spec")
	assert.Equal(t, "platform", path(sts, "spec", "template", "metadata", "labels", "team"))
	assert.Equal(t, "allinone", path(sts, "spec", "template", "metadata", "labels", "app.kubernetes.io/component"))
	assert.Equal(t, "system-cluster-critical", path(pod, "priorityClassName"))
	assert.Equal(t, "topology.kubernetes.io/zone", path(pod, "topologySpreadConstraints", 0, "topologyKey"))
	c := path(pod, "containers", 0)
	assert.Equal(t, []any{"--config=/etc/kelemetry/config/all.yaml", "--log-level=info", "--set=query.maxConcurrent=8"}, path(c, "args"))
	assert.Equal(t, "GOGC", path(c, "env", 0, "name"))
	assert.Equal(t, "kelemetry-env", path(c, "envFrom", 0, "secretRef", "name"))
	assert.Nil(t, path(sts, "spec", "volumeClaimTemplates"), "an existing claim replaces the template")
	var claim any
	for _, v := range path(pod, "volumes").([]any) {
		if path(v, "name") == "data" {
			claim = path(v, "persistentVolumeClaim", "claimName")
		}
	}
	assert.Equal(t, "kelemetry-data", claim)
	assert.Equal(t, "Delete", path(sts, "spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"))

	ing := find(t, objs, "Ingress", "kelemetry-knobs")
	assert.Equal(t, "nginx", path(ing, "spec", "ingressClassName"))
	assert.Equal(t, "kelemetry.example.com", path(ing, "spec", "rules", 0, "host"))
	assert.Equal(t, "/", path(ing, "spec", "rules", 0, "http", "paths", 0, "path"))
	assert.Equal(t, "kelemetry-knobs", path(ing, "spec", "rules", 0, "http", "paths", 0, "backend", "service", "name"), "the API service")
	find(t, objs, "Service", "kelemetry-knobs")
	route := find(t, objs, "HTTPRoute", "kelemetry-knobs")
	assert.Equal(t, "public", path(route, "spec", "parentRefs", 0, "name"))
	assert.Equal(t, "kelemetry-knobs", path(route, "spec", "rules", 0, "backendRefs", 0, "name"))
	assert.EqualValues(t, 16686, path(route, "spec", "rules", 0, "backendRefs", 0, "port"))

	// fullnameOverride names the objects; nameOverride renames them and the name label.
	objs = docs(t, render(t, renderCase{"full", Release{Name: "prod", Namespace: "x"}, map[string]any{"fullnameOverride": "kel"}}).Manifest)
	find(t, objs, "StatefulSet", "kel")
	objs = docs(t, render(t, renderCase{"name", Release{Name: "prod", Namespace: "x"}, map[string]any{"nameOverride": "tracer"}}).Manifest)
	sts = find(t, objs, "StatefulSet", "prod-tracer")
	assert.Equal(t, "tracer", path(sts, "spec", "selector", "matchLabels", "app.kubernetes.io/name"))
}

// followVals are the documented values for a managed cluster: the all-in-one follows the audit log
// a collector writes into a folder of the node it is pinned to.
var managedVals = map[string]any{
	"cluster":        "prod-1",
	"serviceAccount": map[string]any{"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/kelemetry-audit-reader"}},
	"auditCollector": map[string]any{"enabled": true, "container": map[string]any{
		"image":     "registry.example/audit-exporter:1.0",
		"args":      []any{"--log-group=/aws/eks/prod-1/cluster", "--out=/var/log/kelemetry-audit/audit.log", "--rotate-bytes=100Mi"},
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "64Mi"}, "limits": map[string]any{"memory": "256Mi"}},
	}},
}

// managedOTLPVals are the documented values for a managed cluster over OTLP logs.
var managedOTLPVals = map[string]any{
	"cluster":  "prod-1",
	"otlpLogs": map[string]any{"enabled": true, "format": "eks"},
	"networkPolicy": map[string]any{"enabled": true, "webhookFrom": []any{map[string]any{"namespaceSelector": map[string]any{
		"matchLabels": map[string]any{"kubernetes.io/metadata.name": "opentelemetry"}}}}},
}

func caseNamed(t *testing.T, name string) renderCase {
	t.Helper()
	for _, c := range cases {
		if c.name == name {
			return c
		}
	}
	require.Failf(t, "no render case", "%s", name)
	return renderCase{}
}

func render(t *testing.T, c renderCase) Rendered {
	t.Helper()
	r, err := Render(context.Background(), chartDir, c.rel, c.vals)
	require.NoError(t, err)
	return r
}

// docs splits a manifest into its objects.
func docs(t *testing.T, manifest string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range strings.Split(manifest, "\n---\n") {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(d), &obj), d)
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out
}

func find(t *testing.T, objs []map[string]any, kind, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if o["kind"] == kind && md["name"] == name {
			return o
		}
	}
	require.Failf(t, "object not rendered", "%s %s", kind, name)
	return nil
}

func path(o any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func TestLint(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.NoError(t, Lint(chartDir, c.vals))
		})
	}
}

// copyChart copies the chart into a temporary folder, for tests that break it.
func copyChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kelemetry")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	return dir
}

// Lint fails when there is no chart to lint or the chart is broken, naming what is wrong; the
// untouched copy lints clean, so that the breakage is what fails.
func TestLintFailsOnBrokenChart(t *testing.T) {
	require.NoError(t, Lint(copyChart(t), nil), "the copy lints like the chart")

	err := Lint(filepath.Join(t.TempDir(), "missing"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0 charts linted, want 1")

	err = Lint("testdata", nil)
	require.Error(t, err, "a folder without Chart.yaml")
	assert.Contains(t, err.Error(), "0 charts linted, want 1")

	dir := copyChart(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [\n"), 0o644))
	err = Lint(dir, nil)
	require.Error(t, err, "a template rendering invalid YAML")
	assert.Contains(t, err.Error(), "templates/broken.yaml")

	dir = copyChart(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "broken.yaml"), []byte("{{ .Values.nothing.here }}\n"), 0o644))
	err = Lint(dir, nil)
	require.Error(t, err, "a template failing to render")
	assert.Contains(t, err.Error(), "nil pointer evaluating")

	dir = copyChart(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: kelemetry\n"), 0o644))
	err = Lint(dir, nil)
	require.Error(t, err, "a Chart.yaml without a version")
	assert.Contains(t, err.Error(), "Chart.yaml: version is required")
}

// The renders are kept in testdata/golden (go test -run TestGolden -update rewrites them); a
// change of the chart shows there in review.
func TestGolden(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c)
			for file, got := range map[string]string{c.name + ".yaml": MaskGenerated(r.Manifest), c.name + ".NOTES.txt": r.Notes} {
				p := filepath.Join("testdata", "golden", file)
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
					require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
					continue
				}
				want, err := os.ReadFile(p)
				require.NoError(t, err, "run go test -run TestGolden -update")
				assert.Equal(t, string(want), got, "%s differs: run go test -run TestGolden -update and review", p)
			}
		})
	}
}

// The all-in-one: one StatefulSet replica, its data on a claim mounted at /data, non-root and
// read-only root filesystem, probes on /healthz, configuration the binary takes.
func TestAllInOneRender(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "allinone")).Manifest)
	sts := find(t, objs, "StatefulSet", "kelemetry")
	assert.EqualValues(t, 1, path(sts, "spec", "replicas"))
	assert.Equal(t, "data", path(sts, "spec", "volumeClaimTemplates", 0, "metadata", "name"))
	pod := path(sts, "spec", "template", "spec")
	assert.Equal(t, "kelemetry", path(pod, "serviceAccountName"))
	assert.Equal(t, true, path(pod, "securityContext", "runAsNonRoot"))
	assert.EqualValues(t, 65532, path(pod, "securityContext", "runAsUser"))
	ctr := path(pod, "containers", 0)
	assert.Equal(t, true, path(ctr, "securityContext", "readOnlyRootFilesystem"))
	assert.Equal(t, "/healthz", path(ctr, "startupProbe", "httpGet", "path"))
	assert.Equal(t, "/readyz", path(ctr, "readinessProbe", "httpGet", "path"), "the named checks, which answer unauthenticated probes truthfully")
	assert.Equal(t, "/livez", path(ctr, "livenessProbe", "httpGet", "path"), "a full disk makes /healthz 503: no restart for it")
	assert.Equal(t, []any{"--config=/etc/kelemetry/config/all.yaml", "--log-level=info"}, path(ctr, "args"))
	assert.NotNil(t, path(ctr, "resources", "requests"))
	mounts, _ := path(ctr, "volumeMounts").([]any)
	var data bool
	for _, m := range mounts {
		if path(m, "name") == "data" {
			data = path(m, "mountPath") == "/data"
		}
	}
	assert.True(t, data, "the claim is mounted at /data")

	find(t, objs, "Service", "kelemetry-webhook")
	find(t, objs, "Service", "kelemetry")
	for _, o := range objs {
		assert.NotEqual(t, "PodDisruptionBudget", o["kind"], "one replica: a PDB would protect nothing")
	}
	find(t, objs, "CustomResourceDefinition", "linkrules.kelemetry.io")
	find(t, objs, "ServiceAccount", "kelemetry")

	cm := find(t, objs, "ConfigMap", "kelemetry")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(cm, "data", "all.yaml").(string)), &cfg))
	assert.Equal(t, "/data", cfg["dataDir"])
	assert.Equal(t, ":8080", cfg["auditAddr"])
	assert.Equal(t, true, path(cfg, "event", "watch"))
	assert.Equal(t, "kelemetry", path(cfg, "informerDiff", "leaderElection", "leaseNamespace"))
	assert.EqualValues(t, 16<<30, path(cfg, "store", "maxBytes"))
}

// TestAPIServerTracesRender: with apiserverTraces on, the OTLP receiver listens on its port, the
// webhook Service and the NetworkPolicy (the webhook's peers) open it; off, nothing does.
func TestAPIServerTracesRender(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "allinone-secured")).Manifest)
	cm := find(t, objs, "ConfigMap", "kelemetry-secured")
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(cm, "data", "all.yaml").(string)), &cfg))
	assert.Equal(t, ":4317", cfg["otlpAddr"])
	assert.Equal(t, true, path(cfg, "apiserverTraces", "enabled"))
	svc := find(t, objs, "Service", "kelemetry-secured-webhook")
	assert.Equal(t, "otlp", path(svc, "spec", "ports", 1, "name"))
	assert.EqualValues(t, 4317, path(svc, "spec", "ports", 1, "port"))
	sts := find(t, objs, "StatefulSet", "kelemetry-secured")
	ports := path(sts, "spec", "template", "spec", "containers", 0, "ports")
	assert.Contains(t, ports, map[string]any{"name": "otlp", "containerPort": float64(4317), "protocol": "TCP"})
	np := find(t, objs, "NetworkPolicy", "kelemetry-secured")
	assert.Equal(t, []any{map[string]any{"port": "webhook", "protocol": "TCP"}, map[string]any{"port": "otlp", "protocol": "TCP"}},
		path(np, "spec", "ingress", 0, "ports"))
	assert.NotNil(t, path(np, "spec", "ingress", 0, "from"), "open to the webhook's peers only")

	plain := docs(t, render(t, caseNamed(t, "allinone")).Manifest)
	cm = find(t, plain, "ConfigMap", "kelemetry")
	cfg = nil
	require.NoError(t, yaml.Unmarshal([]byte(path(cm, "data", "all.yaml").(string)), &cfg))
	assert.NotContains(t, cfg, "otlpAddr")
	assert.Len(t, path(find(t, plain, "Service", "kelemetry-webhook"), "spec", "ports"), 1)
}

// The ClusterRole grants reads of the watched resources and Events, and the LinkRule status
// patch; no wildcard, no Secrets, no write outside linkrules/status.
func TestClusterRoleLeastPrivilege(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cr := find(t, docs(t, render(t, c).Manifest), "ClusterRole", c.rel.Name)
			rules, _ := path(cr, "rules").([]any)
			require.NotEmpty(t, rules)
			granted := map[string]bool{}
			for _, r := range rules {
				for _, g := range path(r, "apiGroups").([]any) {
					for _, res := range path(r, "resources").([]any) {
						for _, v := range path(r, "verbs").([]any) {
							assert.NotEqual(t, "*", g)
							assert.NotEqual(t, "*", res)
							assert.NotEqual(t, "secrets", res)
							if v != "get" && v != "list" && v != "watch" {
								assert.Equal(t, "linkrules/status", res, "write verb %s", v)
							}
							granted[g.(string)+"/"+res.(string)+":"+v.(string)] = true
						}
					}
				}
			}
			for _, want := range []string{"/pods:watch", "apps/replicasets:get", "apps/deployments:list", "/events:watch",
				"kelemetry.io/linkrules:watch", "kelemetry.io/linkrules/status:patch", "/configmaps:get"} {
				assert.True(t, granted[want], want)
			}
			// ConfigMaps are fetched by name only (Metadata-level audit), never listed.
			assert.False(t, granted["/configmaps:list"])
			assert.False(t, granted["/configmaps:watch"])
		})
	}
}

// rule is an RBAC rule as the renders hold it.
func rule(group, resource string, names []any, verbs ...any) map[string]any {
	r := map[string]any{"apiGroups": []any{group}, "resources": []any{resource}, "verbs": verbs}
	if names != nil {
		r["resourceNames"] = names
	}
	return r
}

// The release namespace's Role, the only one rendered, grants exactly the informer diff's leader
// election on its Lease and, scaled, the Event watch's checkpoint ConfigMap: create (which cannot
// be limited to a name) and get/update of the names the configuration uses, nothing else. Its
// RoleBinding gives it to the chart's ServiceAccount.
func TestRoleLeastPrivilege(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objs := docs(t, render(t, c).Manifest)
			var roles, bindings []map[string]any
			for _, o := range objs {
				switch o["kind"] {
				case "Role":
					roles = append(roles, o)
				case "RoleBinding":
					bindings = append(bindings, o)
				}
			}
			require.Len(t, roles, 1)
			require.Len(t, bindings, 1)
			name := c.rel.Name
			assert.Equal(t, name, path(roles[0], "metadata", "name"))
			assert.Nil(t, path(roles[0], "metadata", "namespace"), "in the release namespace")

			const lease = "kelemetry-diff-informer"
			want := []any{
				rule("coordination.k8s.io", "leases", nil, "create"),
				rule("coordination.k8s.io", "leases", []any{lease}, "get", "update"),
			}
			cm := find(t, objs, "ConfigMap", name)
			var roleCfgs []map[string]any
			for _, data := range path(cm, "data").(map[string]any) {
				var cfg map[string]any
				require.NoError(t, yaml.Unmarshal([]byte(data.(string)), &cfg))
				roleCfgs = append(roleCfgs, cfg)
			}
			if c.vals["mode"] == "scaled" {
				want = append(want,
					rule("", "configmaps", nil, "create"),
					rule("", "configmaps", []any{name + "-event-checkpoint"}, "get", "update"))
			}
			assert.Equal(t, want, path(roles[0], "rules"))

			// The names granted are those the configuration uses.
			var leases, checkpoints int
			for _, cfg := range roleCfgs {
				if path(cfg, "informerDiff", "enabled") == true {
					leases++
					assert.Equal(t, lease, path(cfg, "informerDiff", "leaderElection", "leaseName"))
					assert.Equal(t, c.rel.Namespace, path(cfg, "informerDiff", "leaderElection", "leaseNamespace"))
				}
				if cm := path(cfg, "event", "source", "checkpointConfigMap"); cm != nil {
					checkpoints++
					assert.Equal(t, c.rel.Namespace+"/"+name+"-event-checkpoint", cm)
				}
			}
			assert.Equal(t, 1, leases, "one role elects the informer diff's leader")
			assert.Equal(t, map[bool]int{true: 1, false: 0}[c.vals["mode"] == "scaled"], checkpoints, "scaled: the events role keeps its checkpoint in the ConfigMap")

			b := bindings[0]
			assert.Equal(t, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, path(b, "roleRef"))
			assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": c.rel.Namespace}}, path(b, "subjects"))
		})
	}
}

// extraVolumes and extraVolumeMounts reach the pod and its container after the chart's own, and
// config merges audit.follow into the configuration: the all-in-one follows the node's audit log.
// The managed-cluster mode: the collector runs beside Kelemetry with the shared folder (an
// emptyDir, no hostPath), Kelemetry follows the file in it, and every container keeps the
// restricted security context. extraVolumes still reach every scaled Deployment.
func TestManagedRender(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "allinone-managed")).Manifest)
	pod := path(find(t, objs, "StatefulSet", "kelemetry-managed"), "spec", "template", "spec")
	containers := path(pod, "containers").([]any)
	require.Len(t, containers, 2)
	collector := containers[1]
	assert.Equal(t, "audit-collector", path(collector, "name"))
	assert.Equal(t, "registry.example/audit-exporter:1.0", path(collector, "image"))
	assert.Equal(t, map[string]any{"name": "audit-log", "mountPath": "/var/log/kelemetry-audit"}, path(collector, "volumeMounts", 0))
	assert.Equal(t, false, path(collector, "securityContext", "allowPrivilegeEscalation"))
	assert.Contains(t, path(containers[0], "volumeMounts"), map[string]any{"name": "audit-log", "mountPath": "/var/log/kelemetry-audit", "readOnly": true})
	var shared any
	for _, v := range path(pod, "volumes").([]any) {
		assert.Nil(t, path(v, "hostPath"), "no hostPath: Pod Security restricted")
		if path(v, "name") == "audit-log" {
			shared = v
		}
	}
	assert.Equal(t, map[string]any{"name": "audit-log", "emptyDir": map[string]any{"sizeLimit": "1Gi"}}, shared)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(find(t, objs, "ConfigMap", "kelemetry-managed"), "data", "all.yaml").(string)), &cfg))
	assert.Equal(t, []any{"/var/log/kelemetry-audit/audit.log"}, path(cfg, "audit", "follow"))
	assert.Equal(t, "/data", cfg["dataDir"], "the rest of the configuration stays")
	notes := render(t, caseNamed(t, "allinone-managed")).Notes
	assert.Contains(t, notes, "audit-collector")
	assert.NotContains(t, notes, "--audit-webhook-config-file", "no kube-apiserver flags on a managed cluster")

	// Without an image, or with mode scaled, the render fails with the reason.
	c := caseNamed(t, "allinone-managed")
	_, err := Render(context.Background(), chartDir, c.rel, map[string]any{"auditCollector": map[string]any{"enabled": true}})
	require.ErrorContains(t, err, "auditCollector.container.image")
	_, err = Render(context.Background(), chartDir, c.rel, map[string]any{"mode": "scaled", "scaled": caseNamed(t, "scaled").vals["scaled"],
		"auditCollector": managedVals["auditCollector"]})
	require.ErrorContains(t, err, "auditCollector is for mode allinone")

	// Scaled: every Deployment gets the extra volumes.
	vol := map[string]any{"name": "spool", "emptyDir": map[string]any{}}
	mount := map[string]any{"name": "spool", "mountPath": "/spool"}
	vals := map[string]any{"mode": "scaled", "scaled": caseNamed(t, "scaled").vals["scaled"],
		"extraVolumes": []any{vol}, "extraVolumeMounts": []any{mount}}
	objs = docs(t, render(t, renderCase{rel: rel, vals: vals}).Manifest)
	for _, d := range []string{"ingest", "query", "events"} {
		pod := path(find(t, objs, "Deployment", "kelemetry-"+d), "spec", "template", "spec")
		assert.Contains(t, path(pod, "volumes"), vol, d)
		assert.Contains(t, path(pod, "containers", 0, "volumeMounts"), mount, d)
	}
}

// The managed-cluster mode over OTLP logs: the OTLP receiver on the pods and the webhook Service,
// with the webhook's TLS and token, the cloud format in the configuration, the port open to the
// Collector's namespace, no hostPath, and install notes that give the Collector's exporter.
// apiserverTraces cannot share the receiver.
func TestManagedOTLPRender(t *testing.T) {
	c := caseNamed(t, "allinone-managed-otlp")
	r := render(t, c)
	objs := docs(t, r.Manifest)
	name := c.rel.Name
	pod := path(find(t, objs, "StatefulSet", name), "spec", "template", "spec")
	require.Len(t, path(pod, "containers").([]any), 1, "no collector container: the Collector runs on its own")
	assert.Contains(t, fmt.Sprint(path(pod, "containers", 0, "ports")), "map[containerPort:4317 name:otlp protocol:TCP]")
	for _, v := range path(pod, "volumes").([]any) {
		assert.Nil(t, path(v, "hostPath"), "no hostPath: Pod Security restricted")
	}
	assert.Contains(t, fmt.Sprint(path(find(t, objs, "Service", name+"-webhook"), "spec", "ports")), "map[name:otlp port:4317 targetPort:otlp]")
	assert.Contains(t, path(find(t, objs, "NetworkPolicy", name), "spec", "ingress", 0, "ports"), map[string]any{"port": "otlp", "protocol": "TCP"})
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(find(t, objs, "ConfigMap", name), "data", "all.yaml").(string)), &cfg))
	assert.Equal(t, ":4317", cfg["otlpAddr"])
	assert.Equal(t, map[string]any{"enabled": true, "format": "eks"}, path(cfg, "audit", "otlpLogs"))
	require.NotNil(t, cfg["auditTLS"])
	require.NotNil(t, cfg["auditAuth"])
	assert.Equal(t, cfg["auditTLS"], cfg["otlpTLS"], "the webhook's certificate")
	assert.Equal(t, cfg["auditAuth"], cfg["otlpAuth"], "the webhook's token")
	assert.Nil(t, cfg["apiserverTraces"])
	assert.Contains(t, r.Notes, "endpoint: kelemetry-otlp-webhook.kelemetry-otlp.svc:4317")
	assert.Contains(t, r.Notes, "kelemetry-otlp-webhook-token")
	assert.NotContains(t, r.Notes, "--audit-webhook-config-file", "no kube-apiserver flags on a managed cluster")

	_, err := Render(context.Background(), chartDir, c.rel, map[string]any{"otlpLogs": map[string]any{"enabled": true}, "apiserverTraces": map[string]any{"enabled": true}})
	require.ErrorContains(t, err, "share the OTLP receiver")
	_, err = Render(context.Background(), chartDir, c.rel, map[string]any{"otlpLogs": map[string]any{"enabled": true, "format": "splunk"}})
	require.Error(t, err, "the schema knows the formats")

	// Scaled: the ingest Deployments receive, the query Deployment does not.
	objs = docs(t, render(t, renderCase{rel: c.rel, vals: map[string]any{"mode": "scaled", "scaled": caseNamed(t, "scaled").vals["scaled"],
		"otlpLogs": map[string]any{"enabled": true}}}).Manifest)
	cm := find(t, objs, "ConfigMap", name)
	for role, want := range map[string]bool{"ingest": true, "query": false} {
		var rc map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(path(cm, "data", role+".yaml").(string)), &rc))
		assert.Equal(t, want, rc["otlpAddr"] != nil, role)
		if want {
			assert.NotNil(t, path(rc, "audit", "queue", "nats"), "the NATS queue stays beside otlpLogs")
			assert.Equal(t, true, path(rc, "audit", "otlpLogs", "enabled"))
		}
	}
}

// Scaled: ingest and query Deployments with their replicas, Jaeger and NATS in the
// configuration, one Event watcher.
func TestScaledRender(t *testing.T) {
	c := caseNamed(t, "scaled")
	objs := docs(t, render(t, c).Manifest)
	name := c.rel.Name // the release name holds the chart name: the full name
	assert.EqualValues(t, 3, path(find(t, objs, "Deployment", name+"-ingest"), "spec", "replicas"))
	assert.EqualValues(t, 2, path(find(t, objs, "Deployment", name+"-query"), "spec", "replicas"))
	assert.EqualValues(t, 1, path(find(t, objs, "Deployment", name+"-events"), "spec", "replicas"))
	for _, o := range objs {
		assert.NotEqual(t, "StatefulSet", o["kind"])
	}
	cm := find(t, objs, "ConfigMap", name)
	parse := func(role string) map[string]any {
		var cfg map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(path(cm, "data", role+".yaml").(string)), &cfg))
		return cfg
	}
	ingest, query, events := parse("ingest"), parse("query"), parse("events")
	assert.Equal(t, "ingest", ingest["role"])
	assert.Equal(t, "jaeger", ingest["storeBackend"])
	assert.Equal(t, "jaeger:4317", path(ingest, "jaeger", "otlp", "endpoint"))
	assert.Equal(t, []any{"nats://nats:4222"}, path(ingest, "audit", "queue", "nats", "urls"))
	assert.Equal(t, "KELEMETRY_AUDIT", path(ingest, "audit", "queue", "nats", "stream"))
	assert.Equal(t, false, path(ingest, "event", "watch"))
	assert.Equal(t, "query", query["role"])
	assert.Equal(t, "jaeger:17271", path(query, "jaeger", "endpoint"))
	assert.Equal(t, true, path(events, "event", "watch"))
	assert.Equal(t, c.rel.Namespace+"/"+name+"-event-checkpoint", path(events, "event", "source", "checkpointConfigMap"))
	find(t, objs, "Service", name+"-webhook")
	assert.Equal(t, "ingest", path(find(t, objs, "Service", name+"-webhook"), "spec", "selector", "app.kubernetes.io/component"))
	assert.Equal(t, "query", path(find(t, objs, "Service", name), "spec", "selector", "app.kubernetes.io/component"))
}

// The notes print the kube-apiserver flags and a webhook kubeconfig pointing at the Service, with
// how to fetch the generated CA and tokens; a warning when TLS or authentication is off.
func TestNotes(t *testing.T) {
	n := render(t, caseNamed(t, "allinone")).Notes
	assert.Contains(t, n, "--audit-webhook-config-file=")
	assert.Contains(t, n, "--audit-policy-file=")
	assert.Contains(t, n, "server: https://kelemetry-webhook.kelemetry.svc:8080/audit/default")
	assert.Contains(t, n, "get secret kelemetry-tls -o jsonpath='{.data.ca\\.crt}'")
	assert.Contains(t, n, "get secret kelemetry-webhook-token")
	assert.Contains(t, n, "get secret kelemetry-api-token")
	assert.Contains(t, n, "tokenFile: /etc/kubernetes/kelemetry/token")
	assert.NotContains(t, n, "WARNING", "secure by default")
	plain := caseNamed(t, "allinone")
	plain.vals = map[string]any{"tls": map[string]any{"source": "none"}, "auth": map[string]any{"generateTokens": false}}
	n = render(t, plain).Notes
	assert.Contains(t, n, "server: http://kelemetry-webhook.kelemetry.svc:8080/audit/default")
	assert.Contains(t, n, "WARNING: the webhook serves plain HTTP without authentication")
	assert.Contains(t, n, "WARNING: the API and UI, which serve audit bodies, require no credentials")
	n = render(t, caseNamed(t, "allinone-secured")).Notes
	assert.Contains(t, n, "server: https://10.96.0.50:8080/audit/prod-1")
	assert.Contains(t, n, "client-certificate:")
	assert.NotContains(t, n, "WARNING")
}

// Bad values are refused before anything renders, naming the value and what is wrong.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"unknown mode", map[string]any{"mode": "big"}, []string{"mode", "allinone", "scaled"}},
		{"bad cluster name", map[string]any{"cluster": "Prod/1"}, []string{"cluster", "does not match pattern"}},
		{"misspelt key", map[string]any{"replicas": 3}, []string{"additional properties 'replicas' not allowed"}},
		{"scaled without jaeger", map[string]any{"mode": "scaled"}, []string{"scaled/jaeger/endpoint", "minLength"}},
		{"secrets watched", map[string]any{"watchedResources": []any{"pods", "secrets"}}, []string{"watchedResources/1"}},
		{"secrets fetched", map[string]any{"linkerGetResources": []any{"secrets"}}, []string{"linkerGetResources/0"}},
		{"bad volume size", map[string]any{"allinone": map[string]any{"persistence": map[string]any{"size": "lots"}}}, []string{"allinone/persistence/size"}},
		{"zero replicas", map[string]any{"scaled": map[string]any{"ingest": map[string]any{"replicas": 0}}}, []string{"scaled/ingest/replicas", "minimum"}},
		{"mount without a path", map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "logs"}}}, []string{"extraVolumeMounts/0", "mountPath"}},
		{"relative mount path", map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "logs", "mountPath": "logs"}}}, []string{"extraVolumeMounts/0/mountPath"}},
		{"volume without a name", map[string]any{"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}}, []string{"extraVolumes/0", "name"}},
		{"volume named like the chart's", map[string]any{"extraVolumes": []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}}}, []string{"extraVolumes/0/name"}},
		{"bad nats url", map[string]any{"scaled": map[string]any{"nats": map[string]any{"urls": []any{"localhost:4222"}}}}, []string{"scaled/nats/urls/0"}},
		{"argument without dashes", map[string]any{"extraArgs": []any{"set=window=1h"}}, []string{"extraArgs/0"}},
		{"env without a name", map[string]any{"extraEnv": []any{map[string]any{"value": "50"}}}, []string{"extraEnv/0", "name"}},
		{"route without a gateway", map[string]any{"httpRoute": map[string]any{"enabled": true}}, []string{"httpRoute/parentRefs", "minItems"}},
		{"misspelt ingress key", map[string]any{"ingress": map[string]any{"enabled": true, "class": "nginx"}}, []string{"additional properties 'class' not allowed"}},
		{"relative ingress path", map[string]any{"ingress": map[string]any{"hosts": []any{map[string]any{"paths": []any{map[string]any{"path": "ui"}}}}}}, []string{"ingress/hosts/0/paths/0/path"}},
		{"bad retention", map[string]any{"allinone": map[string]any{"persistence": map[string]any{"retentionPolicy": map[string]any{"whenDeleted": "Keep"}}}}, []string{"retentionPolicy/whenDeleted"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(context.Background(), chartDir, rel, c.vals)
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// The chart's CRD is deploy/crds' (kept in the chart because templates read only its files).
func TestCRDMatchesDeploy(t *testing.T) {
	a, err := os.ReadFile(filepath.Join(chartDir, "files", "kelemetry.io_linkrules.yaml"))
	require.NoError(t, err)
	b, err := os.ReadFile("../../crds/kelemetry.io_linkrules.yaml")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, b), "copy deploy/crds/kelemetry.io_linkrules.yaml to deploy/helm/kelemetry/files/")
}

// The chart's README lists every value with its default and comment, generated from values.yaml
// (go test -run TestReadme -update rewrites it).
func TestReadme(t *testing.T) {
	got, err := Readme(chartDir)
	require.NoError(t, err)
	p := filepath.Join(chartDir, "README.md")
	if *update {
		require.NoError(t, os.WriteFile(p, []byte(got), 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "run go test ./chart -run TestReadme -update")
	assert.Equal(t, string(want), got, "%s is stale: run go test ./chart -run TestReadme -update", p)
	for _, key := range []string{"`cluster`", "`allinone.persistence.existingClaim`", "`ingress.hosts`", "`extraEnv`", "`webhook.port`"} {
		assert.Contains(t, got, "| "+key+" |")
	}
	assert.Contains(t, got, "| `allinone.store.maxBytes` | `16Gi` |")
	for _, line := range strings.Split(got, "\n") {
		assert.False(t, strings.HasSuffix(line, "|  |"), "a value without a comment in values.yaml: %s", line)
	}
}

// Secure by default: the chart generates a CA and a serving certificate valid for every name of
// its Services (and 127.0.0.1 for a port-forward), signed by the CA in ca.crt, and one token for
// each listener; both listeners use them. cert-manager makes the certificate instead (with a CA
// chain of its own when no issuer is named); with none of them, nothing is generated.
func TestCredentialsRender(t *testing.T) {
	objs := docs(t, render(t, caseNamed(t, "allinone")).Manifest)
	sec := find(t, objs, "Secret", "kelemetry-tls")
	assert.Equal(t, "kubernetes.io/tls", sec["type"])
	pemOf := func(key string) []byte {
		b, err := base64.StdEncoding.DecodeString(path(sec, "data", key).(string))
		require.NoError(t, err, key)
		return b
	}
	caBlock, _ := pem.Decode(pemOf("ca.crt"))
	require.NotNil(t, caBlock)
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(pemOf("tls.crt"), pemOf("tls.key"))
	require.NoError(t, err, "tls.crt and tls.key are a pair")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"kelemetry-webhook.kelemetry.svc", "kelemetry.kelemetry.svc", "kelemetry", "localhost", "127.0.0.1"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots})
		assert.NoError(t, err, "the certificate verifies for %s", name)
	}
	for _, which := range []string{"webhook", "api"} {
		tok := find(t, objs, "Secret", "kelemetry-"+which+"-token")
		b, err := base64.StdEncoding.DecodeString(path(tok, "data", "tokens").(string))
		require.NoError(t, err)
		assert.Regexp(t, `^[A-Za-z0-9]{48}$`, string(b), which)
	}
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(find(t, objs, "ConfigMap", "kelemetry"), "data", "all.yaml").(string)), &cfg))
	assert.Equal(t, "/etc/kelemetry/tls/webhook/tls.crt", path(cfg, "auditTLS", "certFile"))
	assert.Equal(t, "/etc/kelemetry/tls/api/tls.crt", path(cfg, "httpTLS", "certFile"))
	assert.Equal(t, []any{"/etc/kelemetry/tokens/webhook/tokens"}, path(cfg, "auditAuth", "tokenFiles"))
	assert.Equal(t, []any{"/etc/kelemetry/tokens/api/tokens"}, path(cfg, "httpAuth", "tokenFiles"))
	assert.Equal(t, "HTTPS", path(find(t, objs, "StatefulSet", "kelemetry"), "spec", "template", "spec", "containers", 0, "readinessProbe", "httpGet", "scheme"))
	find(t, objs, "NetworkPolicy", "kelemetry")

	// A client CA on the webhook replaces its token; Secrets of the user's replace the chart's.
	c := caseNamed(t, "allinone-secured")
	objs = docs(t, render(t, c).Manifest)
	for _, o := range objs {
		if o["kind"] == "Secret" {
			t.Errorf("the secured render names its own Secrets, yet the chart made %v", path(o, "metadata", "name"))
		}
	}

	// cert-manager: without an issuer, a CA chain of the release's own.
	c = caseNamed(t, "allinone")
	c.vals = map[string]any{"tls": map[string]any{"source": "certManager"}}
	objs = docs(t, render(t, c).Manifest)
	cert := find(t, objs, "Certificate", "kelemetry")
	assert.Equal(t, "kelemetry-tls", path(cert, "spec", "secretName"))
	assert.Equal(t, map[string]any{"name": "kelemetry-ca", "kind": "Issuer"}, path(cert, "spec", "issuerRef"))
	assert.Contains(t, path(cert, "spec", "dnsNames"), "kelemetry-webhook.kelemetry.svc")
	find(t, objs, "Issuer", "kelemetry-selfsigned")
	find(t, objs, "Issuer", "kelemetry-ca")
	assert.Equal(t, true, path(find(t, objs, "Certificate", "kelemetry-ca"), "spec", "isCA"))
	c.vals = map[string]any{"tls": map[string]any{"source": "certManager", "certManager": map[string]any{"issuerRef": map[string]any{"name": "corp", "kind": "ClusterIssuer"}}}}
	objs = docs(t, render(t, c).Manifest)
	assert.Equal(t, map[string]any{"name": "corp", "kind": "ClusterIssuer"}, path(find(t, objs, "Certificate", "kelemetry"), "spec", "issuerRef"))
	for _, o := range objs {
		assert.NotEqual(t, "Issuer", o["kind"], "the named issuer signs")
	}

	// Off: plain HTTP, no authentication, nothing generated.
	c.vals = map[string]any{"tls": map[string]any{"source": "none"}, "auth": map[string]any{"generateTokens": false}}
	objs = docs(t, render(t, c).Manifest)
	for _, o := range objs {
		assert.NotContains(t, []any{"Secret", "Certificate"}, o["kind"])
	}
	var plain map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(path(find(t, objs, "ConfigMap", "kelemetry"), "data", "all.yaml").(string)), &plain))
	assert.Nil(t, plain["httpTLS"])
	assert.Nil(t, plain["auditAuth"])
}
