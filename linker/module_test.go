package linker

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

type linkersIn struct {
	fx.In
	Linkers []aggregator.Linker `group:"kelemetry.linkers"`
}

// startLinkers runs Module with opts and returns the linkers it provides, sorted by name.
func startLinkers(t *testing.T, opts ...fx.Option) []aggregator.Linker {
	t.Helper()
	var got []aggregator.Linker
	app := fxtest.New(t, append(opts, Module, fx.NopLogger, fx.Invoke(func(in linkersIn) { got = in.Linkers }))...)
	app.RequireStart()
	app.RequireStop()
	slices.SortFunc(got, func(a, b aggregator.Linker) int { return strings.Compare(a.Name(), b.Name()) })
	return got
}

func names(ls []aggregator.Linker) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name()
	}
	return out
}

func TestModuleValidate(t *testing.T) {
	require.NoError(t, fx.ValidateApp(Module, fx.NopLogger, fx.Invoke(func(linkersIn) {})))
}

func TestModuleNoDependencies(t *testing.T) {
	got := startLinkers(t)
	assert.Equal(t, []string{"annotation", "owner"}, names(got))
	owner := got[1].(*OwnerLinker)
	assert.IsType(t, &kube.StaticMapper{}, owner.mapper)
	assert.Nil(t, owner.getter, "without an ObjectGetter only the events' bodies are read")
}

// With kube.Module, both linkers share its object cache and the owner linker uses its mapper.
func TestModuleWithKube(t *testing.T) {
	var getter kube.ObjectGetter
	var mapper kube.Mapper
	got := startLinkers(t,
		fx.Supply(telemetry.Settings{MeterProvider: kubetest.NewMetrics().Provider}),
		fx.Provide(func() kube.Clusters { return kubetest.Clusters{"c1": kubetest.NewDynamic()} }),
		fx.Provide(func(c kube.Clusters, lc fx.Lifecycle) (kube.ObjectGetter, kube.Mapper, error) {
			a, err := kube.NewAccessFor(c, kube.Config{}, telemetry.Settings{})
			if err != nil {
				return nil, nil, err
			}
			lc.Append(fx.StopHook(a.Stop))
			return a.Getter, a.Mapper, nil
		}),
		fx.Populate(&getter, &mapper),
	)
	require.Equal(t, []string{"annotation", "owner"}, names(got))
	owner, annotation := got[1].(*OwnerLinker), got[0].(*AnnotationLinker)
	require.IsType(t, &kube.ObjectCache{}, getter)
	assert.Same(t, getter, owner.getter)
	assert.Same(t, getter, annotation.getter, "one cache shared by both linkers")
	assert.Same(t, mapper, owner.mapper)
}

// kube.Module without clusters provides a nil getter: the linkers read only the events' bodies.
func TestModuleWithKubeModuleNoClusters(t *testing.T) {
	got := startLinkers(t, kube.Module)
	require.Equal(t, []string{"annotation", "owner"}, names(got))
	owner := got[1].(*OwnerLinker)
	assert.Nil(t, owner.getter)
	assert.IsType(t, &kube.StaticMapper{}, owner.mapper)
}

func TestModuleDisable(t *testing.T) {
	assert.Equal(t, []string{"annotation"}, names(startLinkers(t, fx.Supply(Config{DisableOwner: true}))))
	assert.Equal(t, []string{"owner"}, names(startLinkers(t, fx.Supply(Config{DisableAnnotation: true}))))
	assert.Empty(t, startLinkers(t, fx.Supply(Config{DisableOwner: true, DisableAnnotation: true})))
}

func TestNew(t *testing.T) {
	getter := &kubetest.Getter{}
	static := kube.NewStaticMapper()
	ls, err := New(Config{}, static, getter, telemetry.Settings{})
	require.NoError(t, err)
	require.Equal(t, []string{"owner", "annotation"}, names(ls))
	assert.Same(t, static, ls[0].(*OwnerLinker).mapper)
	assert.Same(t, getter, ls[0].(*OwnerLinker).getter)
	assert.Same(t, getter, ls[1].(*AnnotationLinker).getter)

	ls, err = New(Config{DisableAnnotation: true}, nil, nil, telemetry.Settings{})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	assert.IsType(t, &kube.StaticMapper{}, ls[0].(*OwnerLinker).mapper)
	assert.Nil(t, ls[0].(*OwnerLinker).getter)
}
