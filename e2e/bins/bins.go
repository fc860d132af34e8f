// Package bins locates and builds the binaries the end-to-end tests run: the Kubernetes control
// plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl), kwok, Jaeger v2,
// promtool and helm (each from its nested tool module under tools/), an OpenTelemetry Collector
// (built by the Collector builder pinned in tools/otelcol), this repository's cmd/kelemetry and cmd/kubectl-kelemetry, and nats-server
// (the version the repository's go.mod pins, for the scenarios through the NATS JetStream audit
// queue). They live in one cache folder, $KELEMETRY_E2E_CACHE or $HOME/.cache/kelemetry-e2e/bin.
package bins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Binary names in the cache folder.
const (
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"
	AllInOne              = "kelemetry-allinone"
	// KubectlPlugin is this repository's cmd/kubectl-kelemetry, built with the all-in-one.
	KubectlPlugin = "kubectl-kelemetry"
	// Jaeger is Jaeger v2's binary (github.com/jaegertracing/jaeger/cmd/jaeger, pinned in
	// e2e/tools/jaeger/go.mod).
	Jaeger = "jaeger"
	// NATSServer is nats-server (NATSServerPackage), built from the repository's module, whose
	// go.mod pins it: the version the NATS audit queue is tested against.
	NATSServer = "nats-server"
	// Promtool is Prometheus' promtool (PromtoolPackage, pinned in e2e/tools/promtool): it checks
	// and unit-tests the chart's alerting rules and parses the dashboards' queries.
	Promtool = "promtool"
	// Helm is the helm CLI (HelmPackage, pinned in e2e/tools/helm) that installs and upgrades the
	// chart on the control plane.
	Helm = "helm"
	// OtelCol is an OpenTelemetry Collector built by the Collector builder (CollectorBuilderPackage,
	// pinned in e2e/tools/otelcol) from e2e/tools/otelcol/builder-config.yaml: the filelog and
	// Kafka receivers, the OTLP exporters, file storage. The audit path of a managed cluster is
	// tested through it.
	OtelCol = "otelcol-kelemetry"

	// KwokStagesDir is the folder (under the cache folder) holding kwok's stage YAMLs.
	KwokStagesDir = "kwok-stages"
)

// All lists every binary the end-to-end environment needs.
var All = []string{KubeAPIServer, KubeControllerManager, KubeScheduler, Kubectl, Kwok, AllInOne, KubectlPlugin, Jaeger, NATSServer, Promtool, Helm, OtelCol}

// Main packages of the tools built from their tool modules.
const (
	PromtoolPackage = "github.com/prometheus/prometheus/cmd/promtool"
	HelmPackage     = "helm.sh/helm/v4/cmd/helm"
	// CollectorBuilderPackage is the OpenTelemetry Collector builder (ocb), which generates and
	// builds the Collector distribution that builder-config.yaml describes.
	CollectorBuilderPackage = "go.opentelemetry.io/collector/cmd/builder"
)

// NATSServerPackage is nats-server's main package.
const NATSServerPackage = "github.com/nats-io/nats-server/v2"

// EnvCache names the environment variable that overrides the cache folder.
const EnvCache = "KELEMETRY_E2E_CACHE"

// Dir returns the cache folder: $KELEMETRY_E2E_CACHE, or $HOME/.cache/kelemetry-e2e/bin.
func Dir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder: set %s: %w", EnvCache, err)
	}
	return filepath.Join(home, ".cache", "kelemetry-e2e", "bin"), nil
}

// Missing returns the binaries (and the kwok stage folder) absent from dir.
func Missing(dir string) []string {
	var out []string
	for _, name := range All {
		if !isExecutable(filepath.Join(dir, name)) {
			out = append(out, name)
		}
	}
	stages, _ := filepath.Glob(filepath.Join(dir, KwokStagesDir, "*.yaml"))
	if len(stages) == 0 {
		out = append(out, KwokStagesDir+"/*.yaml")
	}
	return out
}

// KwokStages returns the kwok stage YAML files in dir.
func KwokStages(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, KwokStagesDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no kwok stage file in " + filepath.Join(dir, KwokStagesDir))
	}
	return files, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}
