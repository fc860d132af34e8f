package kelemetry

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linkrule"
	"github.com/kelemetry/kelemetry/store/memory"
)

func TestKubeClustersConfig(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	c := Config{Cluster: "main", Kubeconfig: kc, Clusters: []kube.ClusterConfig{{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}}}
	require.NoError(t, c.Validate())
	got := c.KubeClusters()
	require.Len(t, got, 2)
	assert.Equal(t, kube.ClusterConfig{Name: "main", Kubeconfig: kc, QPS: DefaultKubeQPS, Burst: DefaultKubeBurst}, got[0])
	assert.Equal(t, kube.ClusterConfig{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}, got[1])
	assert.True(t, c.HasCluster("mgmt"))
	assert.False(t, c.HasCluster("other"))

	kc2 := c.kube()
	assert.Equal(t, []string{"main", "mgmt"}, kc2.Names(), "the package kube view of the same clusters")
	assert.Equal(t, got, kc2.WithDefaults().Clusters)
}

// The application provides the clusters of Kubeconfig and Clusters through kube.Module.
func TestModuleProvidesClusters(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	var clusters kube.Clusters
	app := fxtest.New(t, fx.NopLogger, kube.Module,
		fx.Supply(Config{Cluster: "main", Kubeconfig: kc, Clusters: []kube.ClusterConfig{{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b"}}}.kube()),
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
		"no kubeconfig":            {Clusters: []kube.ClusterConfig{{Name: "a"}}},
		"twice":                    {Cluster: "a", Kubeconfig: kc, Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: kc}}},
		"slash in name":            {Clusters: []kube.ClusterConfig{{Name: "a/b", Kubeconfig: kc}}},
		"uppercase cluster":        {Cluster: "Prod"},
		"negative qps":             {Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: kc, QPS: -1}}},
		"event watch elsewhere":    {Cluster: "main", Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: kc}}, Event: eventWatch()},
		"informer unknown cluster": {Cluster: "a", Kubeconfig: kc, InformerDiff: informerOn("b")},
	} {
		assert.Error(t, c.Validate(), name)
	}
	ok := Config{Cluster: "a", Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: kc}, {Name: "b", Kubeconfig: kc}}, Event: eventWatch(), InformerDiff: informerOn("b")}
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
				"clusters[].name":    {Clusters: []kube.ClusterConfig{{Name: tc.Name, Kubeconfig: kc}}},
				"audit.cluster":      {Audit: audit.Config{Cluster: tc.Name}},
				"event.cluster":      {Event: event.Config{Cluster: tc.Name}},
				"linkRules.cluster":  {LinkRules: linkrule.Config{Cluster: tc.Name}},
				"event.watchCluster": {Cluster: "main", Kubeconfig: kc, Clusters: []kube.ClusterConfig{{Name: tc.Name, Kubeconfig: kc}}, Event: event.Config{Watch: true, WatchClusters: []string{tc.Name}}},
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

// memoryLimit and query.maxMemoryBytes: what Validate accepts, what ApplyMemoryLimit sets.
func TestMemoryLimitConfig(t *testing.T) {
	for _, ok := range []string{"", "off", "0", "85%", "1700MiB", "2Gi", "1073741824"} {
		assert.NoError(t, Config{MemoryLimit: ok}.Validate(), ok)
	}
	for _, bad := range []string{"2GB", "0%", "150%", "lots"} {
		assert.ErrorContains(t, Config{MemoryLimit: bad}.Validate(), "memoryLimit", bad)
	}
	assert.ErrorContains(t, Config{Query: frontend.Config{MaxMemoryBytes: -2}}.Validate(), "maxMemoryBytes")
	assert.NoError(t, Config{Query: frontend.Config{MaxMemoryBytes: -1}}.Validate(), "-1: no memory bound")

	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("memoryLimit: 1500MiB\nquery:\n  maxMemoryBytes: 536870912\n"), 0o600))
	c, err := LoadConfig(path)
	require.NoError(t, err)
	assert.Equal(t, "1500MiB", c.MemoryLimit)
	assert.Equal(t, int64(512<<20), c.Query.MaxMemoryBytes)

	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	rec := &logtest.Recorder{}
	got, err := Config{MemoryLimit: "768MiB"}.ApplyMemoryLimit(slog.New(rec))
	require.NoError(t, err)
	assert.Equal(t, int64(768<<20), got)
	assert.Equal(t, int64(768<<20), debug.SetMemoryLimit(-1), "the Go runtime's limit is set")
	require.Len(t, rec.Records(), 1, "said once")
	assert.Equal(t, "memory limit: GOMEMLIMIT 768 MiB", rec.Records()[0].Message)
	// The query frontend's memory budget defaults to a share of it.
	e := frontend.NewEngine(memory.New(memory.Config{}, 0), 0, frontend.Config{})
	assert.Equal(t, int64(768<<20)*40/100, e.MemoryBudget())

	got, err = Config{MemoryLimit: "off"}.ApplyMemoryLimit(slog.New(&logtest.Recorder{}))
	require.NoError(t, err)
	assert.Equal(t, int64(768<<20), got, "off leaves the runtime's limit as it is")

	// GOMEMLIMIT in the environment wins (the runtime applied it when the process started).
	t.Setenv("GOMEMLIMIT", "600MiB")
	debug.SetMemoryLimit(600 << 20)
	got, err = Config{MemoryLimit: "768MiB"}.ApplyMemoryLimit(slog.New(&logtest.Recorder{}))
	require.NoError(t, err)
	assert.Equal(t, int64(600<<20), got)

	_, err = Config{MemoryLimit: "2GB"}.ApplyMemoryLimit(slog.New(&logtest.Recorder{}))
	assert.ErrorContains(t, err, "memoryLimit")
}

// httpMaxConnections and the timeouts reach every listener: the audit and API listeners and the
// remote storage API.
func TestListenerLimitsConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("httpMaxConnections: 64\nhttpTimeouts: {idle: 45s, readHeader: 3s}\nremoteStorageAddr: 127.0.0.1:0\n"), 0o600))
	cfg, err := LoadConfig(file)
	require.NoError(t, err)
	assert.Equal(t, 64, cfg.http().MaxConnections)
	rs := cfg.RemoteStorage()
	assert.Equal(t, 64, rs.MaxConnections)
	assert.Equal(t, 45*time.Second, rs.IdleTimeout)
	assert.Equal(t, 3*time.Second, rs.HandshakeTimeout)
	// Unset: the listeners' own defaults.
	assert.Equal(t, httpserver.DefaultMaxConnections, Config{}.http().WithDefaults().MaxConnections)
}
