package linker

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"k8s.io/client-go/rest"

	"github.com/kelemetry/kelemetry/aggregator"
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
	assert.IsType(t, &StaticMapper{}, owner.mapper)
	assert.Nil(t, owner.getter, "without Clusters there is no object cache")
}

func TestModuleWithClusters(t *testing.T) {
	got := startLinkers(t,
		fx.Supply(Config{ObjectCache: ObjectCacheConfig{Size: 10}}),
		fx.Supply(slog.New(slog.DiscardHandler)),
		fx.Provide(func() metric.MeterProvider { return newMetrics().mp }),
		fx.Provide(fx.Annotate(func() *KubeClusters {
			return NewKubeClusters(map[string]*rest.Config{"c1": {Host: "http://127.0.0.1:1"}})
		}, fx.As(new(Clusters)))),
	)
	require.Equal(t, []string{"annotation", "owner"}, names(got))
	owner, annotation := got[1].(*OwnerLinker), got[0].(*AnnotationLinker)
	assert.IsType(t, &DiscoveryMapper{}, owner.mapper, "KubeClusters also gives discovery")
	require.IsType(t, &ObjectCache{}, owner.getter)
	assert.Same(t, owner.getter, annotation.getter, "one cache shared by both linkers")
	assert.Equal(t, 10, owner.getter.(*ObjectCache).cfg.Size)
}

func TestModuleWithMapper(t *testing.T) {
	static := NewStaticMapper()
	got := startLinkers(t,
		fx.Supply(Config{DisableAnnotation: true}),
		fx.Provide(fx.Annotate(func() *StaticMapper { return static }, fx.As(new(Mapper)))),
	)
	require.Equal(t, []string{"owner"}, names(got))
	assert.Same(t, static, got[0].(*OwnerLinker).mapper)
}

func TestModuleDisable(t *testing.T) {
	assert.Equal(t, []string{"annotation"}, names(startLinkers(t, fx.Supply(Config{DisableOwner: true}))))
	assert.Empty(t, startLinkers(t, fx.Supply(Config{DisableOwner: true, DisableAnnotation: true})))
}

func TestModuleInvalidConfig(t *testing.T) {
	app := fx.New(Module, fx.NopLogger, fx.Supply(Config{ObjectCache: ObjectCacheConfig{TTL: -1}}), fx.Invoke(func(linkersIn) {}))
	require.Error(t, app.Err())
}

// Module provides its object cache for other linkers: the one the built-in linkers use, also
// when both are disabled; nil without Clusters.
func TestModuleSharesObjectGetter(t *testing.T) {
	clusters := fx.Provide(func() Clusters { return fakeClusters{"c1": newFakeDynamic()} })
	var getter ObjectGetter
	var in linkersIn
	app := fxtest.New(t, clusters, Module, fx.NopLogger, fx.Populate(&getter, &in))
	app.RequireStart()
	app.RequireStop()
	require.NotNil(t, getter)
	assert.IsType(t, &ObjectCache{}, getter)
	for _, l := range in.Linkers {
		if o, ok := l.(*OwnerLinker); ok {
			assert.Same(t, getter, o.getter, "one cache")
		}
	}

	app = fxtest.New(t, clusters, fx.Supply(Config{DisableOwner: true, DisableAnnotation: true}), Module, fx.NopLogger, fx.Populate(&getter, &in))
	app.RequireStart()
	app.RequireStop()
	assert.NotNil(t, getter)
	assert.Empty(t, in.Linkers)

	app = fxtest.New(t, Module, fx.NopLogger, fx.Populate(&getter))
	app.RequireStart()
	app.RequireStop()
	assert.Nil(t, getter)
}
