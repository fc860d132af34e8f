package linkrule_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/linkrule"
)

func TestModuleProvidesLinker(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(`
apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata: {name: r}
spec:
  source: {resources: [{group: "", resource: pods}]}
  role: parent
  targets: [{resource: nodes, namespace: "''", name: object.spec.nodeName}]
`), 0o600))
	var in struct {
		fx.In
		Linkers []aggregator.Linker `group:"kelemetry.linkers"`
		Manager *linkrule.Manager
	}
	app := fxtest.New(t, linkrule.Module, fx.Supply(linkrule.Config{Dir: dir}), fx.Populate(&in))
	app.RequireStart()
	defer app.RequireStop()
	require.Len(t, in.Linkers, 1)
	assert.Equal(t, linkrule.LinkerName, in.Linkers[0].Name())
	links, err := in.Linkers[0].Lookup(t.Context(), aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "ns", Name: "p"},
		Body:      []byte(`{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"n1"}}`),
	})
	require.NoError(t, err)
	assert.Equal(t, []aggregator.Link{{Target: aggregator.ObjectRef{Cluster: "c", Resource: "nodes", Name: "n1"}, Role: aggregator.RoleParent}}, links)

	// A missing directory is a start-up error.
	err = fx.New(linkrule.Module, fx.Supply(linkrule.Config{Dir: filepath.Join(dir, "nope")}), fx.Invoke(func(*linkrule.Manager) {}), fx.NopLogger).Err()
	assert.ErrorContains(t, err, "link rules dir")
}
