package objdiff

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/stretchr/testify/require"
)

// bigObject builds a Deployment-like object of about 20 KB; variant changes a few fields.
func bigObject(tb testing.TB, variant int) []byte {
	tb.Helper()
	containers := make([]any, 0, 20)
	for c := range 20 {
		env := make([]any, 0, 20)
		for e := range 20 {
			v := fmt.Sprintf("value-%d-%d", c, e)
			if variant == 1 && c == 3 && e == 7 {
				v = "changed"
			}
			env = append(env, map[string]any{"name": fmt.Sprintf("ENV_%d", e), "value": v})
		}
		image := fmt.Sprintf("registry.example.com/team/app-%d:1.0.%d", c, c)
		if variant == 1 && c == 0 {
			image = "registry.example.com/team/app-0:2.0.0"
		}
		containers = append(containers, map[string]any{
			"name": fmt.Sprintf("c%d", c), "image": image, "env": env,
			"ports":     []any{map[string]any{"containerPort": 8080 + c, "protocol": "TCP"}},
			"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "256Mi"}},
			"args":      []any{"--verbose", "--port", fmt.Sprint(8080 + c)},
		})
	}
	replicas := 2
	if variant == 1 {
		replicas = 4
	}
	obj := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "big", "namespace": "default", "resourceVersion": fmt.Sprint(100 + variant),
			"labels":        map[string]any{"app": "big", "app.kubernetes.io/name": "big"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}}}},
		"spec": map[string]any{"replicas": replicas, "template": map[string]any{"spec": map[string]any{"containers": containers}}},
		"status": map[string]any{"observedGeneration": 1 + variant, "conditions": []any{
			map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "True"}}},
	}
	b, err := json.Marshal(obj)
	require.NoError(tb, err)
	return b
}

func TestBigObject(t *testing.T) {
	a, b := bigObject(t, 0), bigObject(t, 1)
	require.InDelta(t, 20_000, len(a), 5_000)
	got, err := Compare(a, b, diff.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{
		"spec.replicas 2 -> 4",
		"spec.template.spec.containers[name=c0].image registry.example.com/team/app-0:1.0.0 -> registry.example.com/team/app-0:2.0.0",
		"spec.template.spec.containers[name=c3].env[name=ENV_7].value value-3-7 -> changed",
		"status.observedGeneration 1 -> 2",
	}, lines(got))
}

// BenchmarkCompare20KB diffs two 20 KB objects that differ in four fields.
func BenchmarkCompare20KB(b *testing.B) {
	x, y := bigObject(b, 0), bigObject(b, 1)
	d, err := New(diff.Options{})
	require.NoError(b, err)
	b.SetBytes(int64(len(x) + len(y)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Compare(diff.Resource{Group: "apps", Resource: "deployments"}, x, y); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshot20KB strips a 20 KB object for storage.
func BenchmarkSnapshot20KB(b *testing.B) {
	x := bigObject(b, 0)
	d, err := New(diff.Options{})
	require.NoError(b, err)
	b.SetBytes(int64(len(x)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Snapshot(diff.Resource{Group: "apps", Resource: "deployments"}, x); err != nil {
			b.Fatal(err)
		}
	}
}
