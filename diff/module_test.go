package diff

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/kube"
)

type fakeClusters struct{ dyn *fakeDynamic }

func (f fakeClusters) Names() []string { return []string{"c1"} }
func (f fakeClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	if cluster != "c1" {
		return nil, kube.ErrUnknownCluster
	}
	return f.dyn, nil
}
func (f fakeClusters) Discovery(string) (kube.ResourceDiscoverer, error) {
	return fakeDiscovery{}, nil
}

func TestInformerModule(t *testing.T) {
	dyn := newFakeDynamic()
	var res InformerModuleResults
	app := fxtest.New(t,
		InformerModule,
		fx.Supply(InformerModuleConfig{Enabled: true, Informer: InformerConfig{Resources: []string{"pods"}}}),
		fx.Provide(func() kube.Clusters { return fakeClusters{dyn: dyn} }),
		fx.Invoke(func(cache *ChangeCache, ins []*Informer) { res.Cache, res.Informers = cache, ins }),
	)
	app.RequireStart()
	require.NotNil(t, res.Cache)
	require.Len(t, res.Informers, 1)
	select {
	case <-dyn.watches:
	case <-time.After(5 * time.Second):
		t.Fatal("the informer did not start watching")
	}
	app.RequireStop()

	// Off, or without clients: no cache.
	app = fxtest.New(t, InformerModule, fx.Invoke(func(cache *ChangeCache) { assert.Nil(t, cache) }))
	app.RequireStart().RequireStop()
}

type flakyDiscovery struct{ calls atomic.Int32 }

func (f *flakyDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	if f.calls.Add(1) < 3 {
		return nil, nil, errors.New("connection refused")
	}
	return fakeDiscovery{}.ServerGroupsAndResources()
}

func TestInformerRetriesDiscovery(t *testing.T) {
	dyn := newFakeDynamic()
	cache, err := NewChangeCache(ChangeCacheConfig{}, nil)
	require.NoError(t, err)
	disc := &flakyDiscovery{}
	in, err := NewInformer("c1", dyn, disc, cache, InformerConfig{Resources: []string{"pods"}}, nil, nil)
	require.NoError(t, err)
	in.backoffFn = func(int) time.Duration { return time.Millisecond }
	ctx := context.Background()
	require.NoError(t, in.Start(ctx))
	require.Error(t, in.Start(ctx), "start twice")
	select {
	case <-dyn.watches:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch after discovery recovered")
	}
	assert.EqualValues(t, 3, disc.calls.Load())
	require.NoError(t, in.Stop(ctx))
}
