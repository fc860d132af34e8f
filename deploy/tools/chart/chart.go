// Package chart renders and lints the Helm chart deploy/helm/kelemetry through the Helm Go SDK,
// for its tests and for the golden renders the end-to-end tests apply.
package chart

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
)

// kubeVersion is the Kubernetes version renders and lint assume.
var kubeVersion = &chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}

// Release names the release a render is for.
type Release struct {
	Name      string
	Namespace string
}

// Rendered is what helm install would apply, and its notes.
type Rendered struct {
	// Manifest is the YAML documents (CRD included), each after a "# Source:" comment.
	Manifest string
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Render renders the chart in dir with vals, as `helm install --dry-run` without a cluster.
func Render(ctx context.Context, dir string, rel Release, vals map[string]any) (Rendered, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return Rendered{}, fmt.Errorf("chart: load %s: %w", dir, err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.ClientOnly, inst.DryRun, inst.Replace, inst.IncludeCRDs = true, true, true, true
	inst.ReleaseName, inst.Namespace = rel.Name, rel.Namespace
	inst.KubeVersion = kubeVersion
	r, err := inst.RunWithContext(ctx, ch, vals)
	if err != nil {
		return Rendered{}, fmt.Errorf("chart: render: %w", err)
	}
	return Rendered{Manifest: r.Manifest, Notes: r.Info.Notes}, nil
}

// Lint runs helm lint --strict on the chart in dir with vals; it returns the messages of warning
// or error severity.
func Lint(dir string, vals map[string]any) []string {
	l := action.NewLint()
	l.Strict = true
	l.KubeVersion = kubeVersion
	res := l.Run([]string{dir}, vals)
	var out []string
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out
}
