package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// userEvent is an event span of obj in window w with the user attribute.
func userEvent(obj aggregator.ObjectRef, w time.Time, id, user string, offset time.Duration) *aggregator.Span {
	sp := EventSpan(obj, w, id, offset)
	sp.Attributes = append(sp.Attributes, aggregator.Attr{Key: aggregator.AttrUser, Value: user})
	return sp
}

// RunSearch runs the search extensions every store shares: event attributes, trace ID
// prefixes and the cluster list.
func RunSearch(t *testing.T, open func(t *testing.T) Store, lim Limits) {
	ctx := context.Background()
	a := Ref("c1", "apps", "deployments", "ns", "a")
	b := Ref("c1", "apps", "deployments", "ns", "b")
	c := Ref("c2", "", "pods", "ns", "c")
	s := open(t)
	Export(t, s,
		ObjectSpan(a, T0), userEvent(a, T0, "1", "alice", time.Minute),
		ObjectSpan(a, T0.Add(Win)), userEvent(a, T0.Add(Win), "2", "bob", time.Minute),
		ObjectSpan(b, T0), userEvent(b, T0, "3", "bob", 0),
		ObjectSpan(c, T0), // no events
	)

	t.Run("attributes", func(t *testing.T) {
		res, err := s.FindObjects(ctx, query.ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:1"}, Keys(res))
		assert.Equal(t, T0, res[0].Windows[0].Window)

		res, err = s.FindObjects(ctx, query.ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}}})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:1", "c1/apps/deployments/ns/b:1"}, Keys(res))
		assert.Equal(t, T0.Add(Win), res[0].Windows[0].Window, "only windows holding a match")

		res, err = s.FindObjects(ctx, query.ObjectQuery{Limit: 1, Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}}})
		require.NoError(t, err)
		assert.Len(t, res, 1, "the limit counts matching objects")

		// Event times are compared with inclusive bounds.
		res, err = s.FindObjects(ctx, query.ObjectQuery{From: T0.Add(time.Minute), To: T0.Add(time.Minute),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Len(t, res, 1)
		res, err = s.FindObjects(ctx, query.ObjectQuery{From: T0.Add(time.Minute + 1), To: T0.Add(Win - 1),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}}})
		require.NoError(t, err)
		assert.Empty(t, res, "the window overlaps but the event is outside the range")

		res, err = s.FindObjects(ctx, query.ObjectQuery{Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "bob"}, {Key: aggregator.AttrVerb, Value: "delete"}}})
		require.NoError(t, err)
		assert.Empty(t, res, "every attribute must match")
	})

	t.Run("exact", func(t *testing.T) {
		core := Ref("c1", "", "pods", "", "a")
		Export(t, s, ObjectSpan(core, T0))
		res, err := s.FindObjects(ctx, query.ObjectQuery{Cluster: "c1", Resource: "pods", Name: "a"})
		require.NoError(t, err)
		assert.Len(t, res, 1)
		res, err = s.FindObjects(ctx, query.ObjectQuery{Cluster: "c1", Resource: "deployments", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Empty(t, res, "empty group and namespace match only empty values")
		res, err = s.FindObjects(ctx, query.ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/a:2"}, Keys(res))
		res, err = s.FindObjects(ctx, query.ObjectQuery{Cluster: "c1", Resource: "pods", Name: "a", Exact: true})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1//pods//a:1"}, Keys(res))
	})

	t.Run("traces by prefix", func(t *testing.T) {
		tid := aggregator.TraceIDFor(a.Key(), T0.Add(Win))
		res, err := s.FindTraces(ctx, query.TraceQuery{IDPrefix: tid[:12]})
		if errors.Is(err, errors.ErrUnsupported) && lim.NoPrefixScan {
			t.Skip("no prefix scan")
		}
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, query.TraceRef{TraceID: tid, Window: T0.Add(Win), Object: a}, res[0])

		res, err = s.FindTraces(ctx, query.TraceQuery{IDPrefix: tid[:12], From: T0, To: T0.Add(Win - 1)})
		require.NoError(t, err)
		assert.Empty(t, res, "window out of range")

		res, err = s.FindTraces(ctx, query.TraceQuery{IDPrefix: tid[:]})
		require.NoError(t, err)
		assert.Len(t, res, 1)

		_, err = s.FindTraces(ctx, query.TraceQuery{})
		assert.Error(t, err)
	})

	t.Run("get traces", func(t *testing.T) {
		ta0 := aggregator.TraceIDFor(a.Key(), T0)
		ta1 := aggregator.TraceIDFor(a.Key(), T0.Add(Win))
		tb := aggregator.TraceIDFor(b.Key(), T0)
		got, err := s.GetTraces(ctx, []query.ObjectWindow{
			{Window: T0.Add(Win), TraceID: ta1}, {Window: T0, TraceID: tb}, {Window: T0, TraceID: ta1}, {Window: T0, TraceID: ta0},
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
