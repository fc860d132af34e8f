package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
)

func userEvent(obj aggregator.ObjectRef, w time.Time, id, user string, offset time.Duration) *aggregator.Span {
	sp := eventSpan(obj, w, id, offset)
	sp.Attributes = append(sp.Attributes, aggregator.Attr{Key: aggregator.AttrUser, Value: user})
	return sp
}

// testSearch runs the search extensions every Store shares: event attributes, trace ID
// prefixes and the cluster list.
func testSearch(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	a := ref("c1", "apps", "deployments", "ns", "a")
	b := ref("c1", "apps", "deployments", "ns", "b")
	c := ref("c2", "", "pods", "ns", "c")
	s := open(t)
	export(t, s,
		objectSpan(a, t0), userEvent(a, t0, "1", "alice", time.Minute),
		objectSpan(a, t0.Add(win)), userEvent(a, t0.Add(win), "2", "bob", time.Minute),
		objectSpan(b, t0), userEvent(b, t0, "3", "bob", 0),
		objectSpan(c, t0), // no events
	)

	t.Run("attributes", func(t *testing.T) {
		res, err := s.FindObjects(ctx, ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:1"}, keys(res))
		assert.Equal(t, t0, res[0].Windows[0].Window)

		res, err = s.FindObjects(ctx, ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}}})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:1", "c1/apps/deployments/ns/b:1"}, keys(res))
		assert.Equal(t, t0.Add(win), res[0].Windows[0].Window, "only windows holding a match")

		res, err = s.FindObjects(ctx, ObjectQuery{Limit: 1, Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}}})
		require.NoError(t, err)
		assert.Len(t, res, 1, "the limit counts matching objects")

		// Event times are compared with inclusive bounds.
		res, err = s.FindObjects(ctx, ObjectQuery{From: t0.Add(time.Minute), To: t0.Add(time.Minute),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Len(t, res, 1)
		res, err = s.FindObjects(ctx, ObjectQuery{From: t0.Add(time.Minute + 1), To: t0.Add(win - 1),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Empty(t, res, "the window overlaps but the event is outside the range")

		res, err = s.FindObjects(ctx, ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}, {Key: aggregator.AttrVerb, Value: "delete"}}})
		require.NoError(t, err)
		assert.Empty(t, res, "every attribute must match")
	})

	t.Run("exact", func(t *testing.T) {
		core := ref("c1", "", "pods", "", "a")
		export(t, s, objectSpan(core, t0))
		res, err := s.FindObjects(ctx, ObjectQuery{Cluster: "c1", Resource: "pods", Name: "a"})
		require.NoError(t, err)
		assert.Len(t, res, 1)
		res, err = s.FindObjects(ctx, ObjectQuery{Cluster: "c1", Resource: "deployments", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Empty(t, res, "empty group and namespace match only empty values")
		res, err = s.FindObjects(ctx, ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:2"}, keys(res))
		res, err = s.FindObjects(ctx, ObjectQuery{Cluster: "c1", Resource: "pods", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1//pods//a:1"}, keys(res))
	})

	t.Run("traces by prefix", func(t *testing.T) {
		tid := aggregator.TraceIDFor(a.Key(), t0.Add(win))
		res, err := s.FindTraces(ctx, TraceQuery{IDPrefix: tid[:12]})
		if errors.Is(err, errors.ErrUnsupported) {
			skipJaeger(t, s, "no prefix scan")
		}
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, TraceRef{TraceID: tid, Window: t0.Add(win), Object: a}, res[0])

		res, err = s.FindTraces(ctx, TraceQuery{IDPrefix: tid[:12], From: t0, To: t0.Add(win - 1)})
		require.NoError(t, err)
		assert.Empty(t, res, "window out of range")

		res, err = s.FindTraces(ctx, TraceQuery{IDPrefix: tid[:]})
		require.NoError(t, err)
		assert.Len(t, res, 1)

		_, err = s.FindTraces(ctx, TraceQuery{})
		assert.Error(t, err)
	})

	t.Run("get traces", func(t *testing.T) {
		ta0 := aggregator.TraceIDFor(a.Key(), t0)
		ta1 := aggregator.TraceIDFor(a.Key(), t0.Add(win))
		tb := aggregator.TraceIDFor(b.Key(), t0)
		got, err := s.GetTraces(ctx, []ObjectWindow{
			{Window: t0.Add(win), TraceID: ta1}, {Window: t0, TraceID: tb}, {Window: t0, TraceID: ta1}, {Window: t0, TraceID: ta0},
		})
		require.NoError(t, err)
		require.Len(t, got, 4)
		for i, want := range []int{2, 2, 0, 2} {
			assert.Len(t, got[i], want, i)
		}
		assert.Equal(t, ta1, got[0][0].TraceID)
		assert.Equal(t, tb, got[1][1].TraceID)
		assert.Equal(t, aggregator.KindObject, got[3][0].Kind, "sorted by start")
		single, err := s.GetTrace(ctx, ta0)
		require.NoError(t, err)
		assert.Equal(t, single, got[3])
		got, err = s.GetTraces(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("clusters", func(t *testing.T) {
		cl, err := s.Clusters(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"c1", "c2"}, cl)
		cl, err = open(t).Clusters(ctx)
		require.NoError(t, err)
		assert.Empty(t, cl)
	})
}

func TestMemorySearch(t *testing.T) {
	testSearch(t, func(t *testing.T) Store { return NewMemory(MemoryConfig{}, 0) })
}

func TestPebbleSearch(t *testing.T) {
	testSearch(t, func(t *testing.T) Store { return openTestPebble(t, PebbleConfig{}, nil) })
}
