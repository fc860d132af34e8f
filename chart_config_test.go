package kelemetry

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// chartGoldenDir holds the Helm chart's golden renders (deploy/tools/chart, a nested module that
// has the Helm SDK; the root module cannot import it).
const chartGoldenDir = "deploy/tools/chart/testdata/golden"

// TestChartConfigsLoad checks that every Kelemetry configuration file the chart renders into its
// ConfigMap, in each mode, is one this build loads and validates: a key the chart writes that the
// binary does not know (or no longer knows) would otherwise only show at helm install time.
func TestChartConfigsLoad(t *testing.T) {
	renders, err := filepath.Glob(filepath.Join(chartGoldenDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, renders, "the chart's golden renders")
	for _, render := range renders {
		data, err := os.ReadFile(render)
		require.NoError(t, err)
		files := 0
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var obj struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
				Data map[string]string `yaml:"data"`
			}
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, render)
			// The configuration's ConfigMap is named after the release (kelemetry, or
			// kelemetry-<case> in the golden renders); the kubeconfig's is <release>-kubeconfig,
			// the Grafana dashboards' <release>-dashboard-<name>.
			if obj.Kind != "ConfigMap" || !strings.HasPrefix(obj.Metadata.Name, "kelemetry") || strings.HasSuffix(obj.Metadata.Name, "-kubeconfig") ||
				strings.Contains(obj.Metadata.Name, "-dashboard-") {
				continue
			}
			for name, text := range obj.Data {
				t.Run(filepath.Base(render)+"/"+name, func(t *testing.T) {
					path := filepath.Join(t.TempDir(), name)
					require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
					c, err := LoadConfig(path)
					require.NoError(t, err)
					require.NoError(t, withTestSecurityFiles(t, c).Validate())
				})
				files++
			}
		}
		require.NotZero(t, files, "%s renders no Kelemetry configuration", render)
	}
}
