// Package chart renders and lints the Helm chart deploy/helm/kelemetry through the Helm Go SDK,
// for its tests and for the golden renders the end-to-end tests apply.
package chart

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

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

// generatedValue is a data value of a Secret the chart generates (annotated
// kelemetry.io/generated): a certificate, a key, a token.
var generatedValue = regexp.MustCompile(`(?m)^(  [a-z.]+: )[A-Za-z0-9+/=]{8,}$`)

// generatedPlaceholder is base64 of "GENERATED".
const generatedPlaceholder = "R0VORVJBVEVE"

// MaskGenerated replaces the data values of the Secrets the chart generates (new random ones in
// every render without a cluster) with base64 of "GENERATED", so that a golden render is stable
// and can still be applied.
func MaskGenerated(manifest string) string {
	docs := strings.Split(manifest, "\n---\n")
	for i, d := range docs {
		if strings.Contains(d, "kelemetry.io/generated:") {
			docs[i] = generatedValue.ReplaceAllString(d, "${1}"+generatedPlaceholder)
		}
	}
	return strings.Join(docs, "\n---\n")
}

// Lint runs helm lint --strict on the chart in dir with vals. It fails when the chart cannot be
// linted (no chart in dir, a Chart.yaml that does not load), when other than exactly one chart was
// linted, and on every message of warning or error severity, each naming its file.
func Lint(dir string, vals map[string]any) error {
	l := action.NewLint()
	l.Strict = true
	l.KubeVersion = kubeVersion
	res := l.Run([]string{dir}, vals)
	if res.TotalChartsLinted != 1 {
		err := errors.Join(res.Errors...)
		if err == nil {
			err = errors.New("no error reported")
		}
		return fmt.Errorf("chart: lint %s: %d charts linted, want 1: %w", dir, res.TotalChartsLinted, err)
	}
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, errors.New(m.Error()))
		}
	}
	if len(errs) == 0 {
		// Run reports every message of warning severity and above in Errors too: whatever is
		// there without a message is still a failure.
		errs = res.Errors
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chart: lint %s: %w", dir, err)
	}
	return nil
}
