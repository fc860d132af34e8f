package kube_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestClustersFrom(t *testing.T) {
	got := kube.ClustersFrom("main", "/kc", []kube.ClusterConfig{{Kubeconfig: "/kc2"}, {Name: "mgmt", Kubeconfig: "/kc3", QPS: 7}})
	assert.Equal(t, []kube.ClusterConfig{
		{Name: "main", Kubeconfig: "/kc"},
		{Name: "main", Kubeconfig: "/kc2"},
		{Name: "mgmt", Kubeconfig: "/kc3", QPS: 7},
	}, got)
	assert.Empty(t, kube.ClustersFrom("main", "", nil))
}

func TestConfigDefaults(t *testing.T) {
	c := kube.Config{Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: "/kc"}, {Name: "b", Kubeconfig: "/kc", QPS: 7, Burst: 9}}}
	d := c.WithDefaults()
	assert.Equal(t, []kube.ClusterConfig{
		{Name: "a", Kubeconfig: "/kc", QPS: kube.DefaultQPS, Burst: kube.DefaultBurst},
		{Name: "b", Kubeconfig: "/kc", QPS: 7, Burst: 9},
	}, d.Clusters)
	assert.Zero(t, c.Clusters[0].QPS, "WithDefaults does not change its receiver's clusters")
	assert.Equal(t, kube.DefaultObjectCacheSize, d.ObjectCache.Size)
	assert.Equal(t, kube.DefaultMinRefreshInterval, d.Discovery.MinRefreshInterval)
	assert.True(t, c.Has("b"))
	assert.False(t, c.Has("c"))
	assert.Equal(t, []string{"a", "b"}, c.Names())
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, kube.Config{}.Validate())
	for name, tc := range map[string]struct {
		cfg  kube.Config
		want string
	}{
		"no kubeconfig":   {kube.Config{Clusters: []kube.ClusterConfig{{Name: "a"}}}, "kubeconfig is required"},
		"twice":           {kube.Config{Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: "/kc"}, {Name: "a", Kubeconfig: "/kc"}}}, "configured twice"},
		"no name":         {kube.Config{Clusters: []kube.ClusterConfig{{Kubeconfig: "/kc"}}}, "invalid cluster name"},
		"negative qps":    {kube.Config{Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: "/kc", QPS: -1}}}, "must not be negative"},
		"negative ttl":    {kube.Config{ObjectCache: kube.ObjectCacheConfig{TTL: -1}}, "must not be negative"},
		"negative maxAge": {kube.Config{Discovery: kube.DiscoveryConfig{MaxAge: -1}}, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorContains(t, tc.cfg.Validate(), tc.want)
		})
	}
}

// Cluster names follow aggregator.ValidateClusterName.
func TestClusterNameRule(t *testing.T) {
	for _, tc := range aggregatortest.ClusterNames {
		err := kube.Config{Clusters: []kube.ClusterConfig{{Name: tc.Name, Kubeconfig: "/kc"}}}.Validate()
		assert.Equal(t, tc.Valid, err == nil, "%s: %v", tc.Name, err)
		if !tc.Valid {
			assert.ErrorIs(t, err, aggregator.ErrInvalidClusterName)
		}
	}
}

func TestRestConfig(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	rc, err := kube.RestConfig(kube.ClusterConfig{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9})
	require.NoError(t, err)
	assert.Equal(t, "https://b.example:6443", rc.Host, "the named context")
	assert.Equal(t, float32(7), rc.QPS)
	assert.Equal(t, 9, rc.Burst)
	assert.Equal(t, "kelemetry", rc.UserAgent)

	rc, err = kube.RestConfig(kube.ClusterConfig{Name: "main", Kubeconfig: kc})
	require.NoError(t, err)
	assert.Equal(t, "https://a.example:6443", rc.Host, "the current context")
	assert.Equal(t, float32(kube.DefaultQPS), rc.QPS, "not client-go's default of 5")
	assert.Equal(t, kube.DefaultBurst, rc.Burst)

	_, err = kube.RestConfig(kube.ClusterConfig{Name: "x", Kubeconfig: kc, Context: "missing"})
	assert.ErrorContains(t, err, "cluster x")
}

func TestNewClusters(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	clusters, err := kube.NewClusters(kube.Config{Clusters: []kube.ClusterConfig{{Name: "main", Kubeconfig: kc}, {Name: "mgmt", Kubeconfig: kc, Context: "ctx-b"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"main", "mgmt"}, clusters.Names())
	_, err = clusters.Dynamic("mgmt")
	require.NoError(t, err)
	_, err = clusters.Dynamic("nope")
	require.ErrorIs(t, err, kube.ErrUnknownCluster)

	clusters, err = kube.NewClusters(kube.Config{})
	require.NoError(t, err)
	assert.Nil(t, clusters, "no cluster configured")

	_, err = kube.NewClusters(kube.Config{Clusters: []kube.ClusterConfig{{Name: "a", Kubeconfig: filepath.Join(t.TempDir(), "absent")}}})
	assert.Error(t, err)
	_, err = kube.NewClusters(kube.Config{Clusters: []kube.ClusterConfig{{Name: "A", Kubeconfig: kc}}})
	assert.ErrorIs(t, err, aggregator.ErrInvalidClusterName)
}

type provided struct {
	fx.In

	Clusters kube.Clusters
	Mapper   kube.Mapper
	Getter   kube.ObjectGetter
}

// startModule runs Module with opts and returns what it provides.
func startModule(t *testing.T, opts ...fx.Option) provided {
	t.Helper()
	var got provided
	app := fxtest.New(t, append(opts, kube.Module, fx.NopLogger, fx.Invoke(func(p provided) { got = p }))...)
	app.RequireStart()
	app.RequireStop()
	return got
}

func TestModuleNoClusters(t *testing.T) {
	got := startModule(t)
	assert.Nil(t, got.Clusters, "a nil interface: no cluster access")
	assert.Nil(t, got.Getter)
	assert.IsType(t, &kube.StaticMapper{}, got.Mapper)
}

func TestModuleWithClusters(t *testing.T) {
	kc := kubetest.WriteKubeconfig(t)
	m := kubetest.NewMetrics()
	got := startModule(t,
		fx.Supply(kube.Config{Clusters: []kube.ClusterConfig{{Name: "main", Kubeconfig: kc}}, ObjectCache: kube.ObjectCacheConfig{Size: 10}}),
		fx.Supply(telemetry.Settings{MeterProvider: m.Provider}),
	)
	require.IsType(t, &kube.RESTClusters{}, got.Clusters)
	assert.Equal(t, []string{"main"}, got.Clusters.(*kube.RESTClusters).Names())
	assert.IsType(t, &kube.DiscoveryMapper{}, got.Mapper, "RESTClusters also gives discovery")
	assert.IsType(t, &kube.ObjectCache{}, got.Getter)
}

func TestModuleInvalidConfig(t *testing.T) {
	app := fx.New(kube.Module, fx.NopLogger, fx.Supply(kube.Config{ObjectCache: kube.ObjectCacheConfig{TTL: -1}}), fx.Invoke(func(provided) {}))
	require.Error(t, app.Err())
}

// NewAccessFor builds an Access over any Clusters; the mapper uses discovery only when the
// clusters give it.
func TestNewAccessFor(t *testing.T) {
	a, err := kube.NewAccessFor(kubetest.Clusters{"c1": kubetest.NewDynamic()}, kube.Config{}, telemetry.Settings{})
	require.NoError(t, err)
	assert.IsType(t, &kube.ObjectCache{}, a.Getter)
	assert.IsType(t, &kube.StaticMapper{}, a.Mapper)
	require.NoError(t, a.Stop(t.Context()))
	require.NoError(t, a.Stop(t.Context()), "Stop twice")

	a, err = kube.NewAccessFor(nil, kube.Config{}, telemetry.Settings{})
	require.NoError(t, err)
	assert.Nil(t, a.Clusters)
	assert.Nil(t, a.Getter)
	require.NoError(t, a.Stop(t.Context()))
}
