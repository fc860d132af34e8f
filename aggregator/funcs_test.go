package aggregator_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
)

func TestFuncAdaptersInAnEngine(t *testing.T) {
	var mu sync.Mutex
	var exported []*aggregator.Span
	sink := aggregator.SinkFunc(func(_ context.Context, spans []*aggregator.Span) error {
		mu.Lock()
		defer mu.Unlock()
		exported = append(exported, spans...) // keep the spans, not the slice
		return nil
	})
	owner := aggregator.NewLinker("owner", func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		if obj.Key() == pod.Key() {
			return []aggregator.Link{{Target: rs, Role: aggregator.RoleParent}}, nil
		}
		return nil, nil
	})
	tag := aggregator.NewDecorator("tag", func(_ context.Context, sp *aggregator.Span) {
		// A new slice: the attributes may be shared with the event.
		sp.Attributes = append(sp.Attributes[:len(sp.Attributes):len(sp.Attributes)], aggregator.Attr{Key: "team", Value: "web"})
	})
	assert.Equal(t, "owner", owner.Name())
	assert.Equal(t, "tag", tag.Name())

	e := newEngine(t, aggregator.Config{}, aggregator.Deps{
		Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{owner}, Decorators: []aggregator.Decorator{tag},
	})
	require.NoError(t, e.Send(context.Background(), event(pod, "a", base)))
	require.NoError(t, e.Stop(context.Background()))

	mu.Lock()
	defer mu.Unlock()
	kinds := map[aggregator.SpanKind]int{}
	for _, sp := range exported {
		kinds[sp.Kind]++
		team, ok := sp.Attributes.Get("team")
		assert.True(t, ok && team == "web", "span %s %q is decorated", sp.Kind, sp.Name)
	}
	assert.Equal(t, 1, kinds[aggregator.KindEvent])
	assert.Equal(t, 2, kinds[aggregator.KindObject], "the pod and its linked ReplicaSet")
	assert.Equal(t, 2, kinds[aggregator.KindLink], "pod -> ReplicaSet and back")
}

func TestFuncAdapters(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		linker  aggregator.Linker
		links   int
		wantErr error
	}{
		{"nil func finds nothing", aggregator.NewLinker("nil", nil), 0, nil},
		{"links", aggregator.NewLinker("one", func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
			return []aggregator.Link{{Target: rs, Role: aggregator.RoleParent}}, nil
		}), 1, nil},
		{"error", aggregator.NewLinker("err", func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
			return nil, boom
		}), 0, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			links, err := tc.linker.Lookup(ctx, aggregator.Object{ObjectRef: pod})
			assert.ErrorIs(t, err, tc.wantErr)
			assert.Len(t, links, tc.links)
		})
	}

	sp := &aggregator.Span{Name: "x"}
	aggregator.NewDecorator("nil", nil).Decorate(ctx, sp)
	assert.Equal(t, &aggregator.Span{Name: "x"}, sp, "a nil DecoratorFunc changes nothing")
	aggregator.NewDecorator("rename", func(_ context.Context, sp *aggregator.Span) { sp.Name = "y" }).Decorate(ctx, sp)
	assert.Equal(t, "y", sp.Name)

	assert.NoError(t, aggregator.SinkFunc(nil).Export(ctx, []*aggregator.Span{sp}))
	assert.ErrorIs(t, aggregator.SinkFunc(func(context.Context, []*aggregator.Span) error { return boom }).Export(ctx, nil), boom)
}
