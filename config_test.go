package kelemetry

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/linker"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(testKubeconfig), 0o600))
	return path
}

func TestKubeClustersConfig(t *testing.T) {
	kc := writeKubeconfig(t)
	c := Config{Cluster: "main", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}}}
	require.NoError(t, c.Validate())
	got := c.KubeClusters()
	require.Len(t, got, 2)
	assert.Equal(t, ClusterConfig{Name: "main", Kubeconfig: kc, QPS: DefaultKubeQPS, Burst: DefaultKubeBurst}, got[0])
	assert.Equal(t, ClusterConfig{Name: "mgmt", Kubeconfig: kc, Context: "ctx-b", QPS: 7, Burst: 9}, got[1])
	assert.True(t, c.HasCluster("mgmt"))
	assert.False(t, c.HasCluster("other"))

	rc, err := restConfig(got[1])
	require.NoError(t, err)
	assert.Equal(t, "https://b.example:6443", rc.Host, "the named context")
	assert.Equal(t, float32(7), rc.QPS)
	assert.Equal(t, 9, rc.Burst)
	rc, err = restConfig(got[0])
	require.NoError(t, err)
	assert.Equal(t, "https://a.example:6443", rc.Host, "the current context")
	assert.Equal(t, float32(DefaultKubeQPS), rc.QPS, "not client-go's default of 5")

	out, err := newClusters(c)
	require.NoError(t, err)
	assert.Equal(t, []string{"main", "mgmt"}, out.Clusters.(*linker.KubeClusters).Names())
	_, err = out.Clusters.Dynamic("mgmt")
	require.NoError(t, err)
	_, err = out.Clusters.Dynamic("nope")
	require.ErrorIs(t, err, linker.ErrUnknownCluster)

	_, err = restConfig(ClusterConfig{Name: "x", Kubeconfig: kc, Context: "missing"})
	assert.ErrorContains(t, err, "cluster x")
	_, err = newClusters(Config{Kubeconfig: filepath.Join(t.TempDir(), "absent")})
	assert.Error(t, err)
}

func TestKubeClustersValidate(t *testing.T) {
	kc := writeKubeconfig(t)
	for name, c := range map[string]Config{
		"no kubeconfig":            {Clusters: []ClusterConfig{{Name: "a"}}},
		"twice":                    {Cluster: "a", Kubeconfig: kc, Clusters: []ClusterConfig{{Name: "a", Kubeconfig: kc}}},
		"slash in name":            {Clusters: []ClusterConfig{{Name: "a/b", Kubeconfig: kc}}},
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
