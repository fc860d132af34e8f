package kelemetry

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator/aggregatortest"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/kube/kubetest"
	"github.com/kelemetry/kelemetry/linkrule"
)

func TestKubeClustersConfig(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	c := Config{Cluster: "main", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}}}
	require.NoError(t, c.Validate())
	got := c.KubeClusters()
	require.Len(t, got, 2)
	assert.Equal(t, ClusterConfig{Name: "main", Kubeconfig: kc, QPS: DefaultKubeQPS, Burst: DefaultKubeBurst}, got[0])
	assert.Equal(t, ClusterConfig{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}, got[1])
	assert.True(t, c.HasCluster("mgmt"))
	assert.False(t, c.HasCluster("other"))

	kc2 := c.Kube()
	assert.Equal(t, []string{"main", "mgmt"}, kc2.Names(), "the package kube view of the same clusters")
	assert.Equal(t, got, kc2.WithDefaults().Clusters)
}

// The application provides the clusters of Kubeconfig and Clusters through kube.Module.
func TestModuleProvidesClusters(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	var clusters kube.Clusters
	app := fxtest.New(t, fx.NopLogger, kube.Module,
		fx.Supply(Config{Cluster: "main", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b"}}}.Kube()),
		fx.Populate(&clusters))
	app.RequireStart()
	app.RequireStop()
	require.IsType(t, &kube.RESTClusters{}, clusters)
	assert.Equal(t, []string{"main", "mgmt"}, clusters.(*kube.RESTClusters).Names())
	_, err := clusters.Dynamic("nope")
	require.ErrorIs(t, err, kube.ErrUnknownCluster)
}

func TestKubeClustersValidate(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	for name, c := range map[string]Config{
		"no kubeconfig":            {Clusters: []ClusterConfig{{Name: "a"}}},
		"twice":                    {Cluster: "a", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: "a", Kubeconfig: kc}}},
		"slash in name":            {Clusters: []ClusterConfig{{Name: "a/b", Kubeconfig: kc}}},
		"uppercase cluster":        {Cluster: "Prod"},
		"negative qps":             {Clusters: []ClusterConfig{{Name: "a", Kubeconfig: kc, QPS: -1}}},
		"event watch elsewhere":    {Cluster: "main", Clusters: []ClusterConfig{{Name: "a", Kubeconfig: kc}}, Event: eventWatch()},
		"informer unknown cluster": {Cluster: "a", Kubeconfig: kc, InformerDiff: informerOn("b")},
	} {
		assert.Error(t, c.Validate(), name)
	}
	ok := Config{Cluster: "a", Clusters: []ClusterConfig{{Name: "a", Kubeconfig: kc}, {Name: "b", Kubeconfig: kc}}, Event: eventWatch(), InformerDiff: informerOn("b")}
	assert.NoError(t, ok.Validate())
}

func eventWatch() event.Config { return event.Config{Watch: true} }

func informerOn(clusters ...string) informer.ModuleConfig {
	return informer.ModuleConfig{Enabled: true, Clusters: clusters}
}

// The application's cluster name, the names of its clusters, and the names the audit, event and
// link rule sections take follow aggregator.ValidateClusterName.
func TestClusterNameRule(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	for _, tc := range aggregatortest.ClusterNames {
		t.Run(tc.Name, func(t *testing.T) {
			for what, c := range map[string]Config{
				"cluster":            {Cluster: tc.Name},
				"clusters[].name":    {Clusters: []ClusterConfig{{Name: tc.Name, Kubeconfig: kc}}},
				"audit.cluster":      {Audit: audit.Config{Cluster: tc.Name}},
				"event.cluster":      {Event: event.Config{Cluster: tc.Name}},
				"linkRules.cluster":  {LinkRules: linkrule.Config{Cluster: tc.Name}},
				"event.watchCluster": {Cluster: "main", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: tc.Name, Kubeconfig: kc}}, Event: event.Config{Watch: true, WatchClusters: []string{tc.Name}}},
			} {
				err := c.Validate()
				assert.Equal(t, tc.Valid, err == nil, "%s: %v", what, err)
			}
		})
	}
}

// The example configuration in deploy/ loads: every key it shows exists.
func TestDeployAllinoneConfigLoads(t *testing.T) {
	c, err := LoadConfig(filepath.Join("deploy", "allinone.yaml"))
	require.NoError(t, err)
	require.NoError(t, withTestSecurityFiles(t, c).Validate())
	assert.Equal(t, 30*time.Second, c.HTTPTimeouts.Read)
	assert.Equal(t, 30*time.Minute, c.Window)
}
