package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Run runs the behaviour every store shares. open returns an empty store.
func Run(t *testing.T, open func(t *testing.T) Store, lim Limits) {
	ctx := context.Background()

	t.Run("upsert keeps one span per ID", func(t *testing.T) {
		s := open(t)
		obj := Ref("c1", "apps", "deployments", "ns", "web")
		first := EventSpan(obj, T0, "a", time.Minute)
		second := *first
		second.Name = "renamed"
		Export(t, s, first, ObjectSpan(obj, T0))
		Export(t, s, &second, ObjectSpan(obj, T0))
		Export(t, s, &second) // again, in its own batch

		got, err := s.GetTrace(ctx, first.TraceID)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, aggregator.KindObject, got[0].Kind)
		assert.Equal(t, "renamed", got[1].Name)

		res, err := s.FindObjects(ctx, query.ObjectQuery{})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/web:1"}, Keys(res))
	})

	t.Run("request spans round-trip under their event and match no search", func(t *testing.T) {
		s := open(t)
		obj := Ref("c1", "", "pods", "ns", "web-1")
		ev := EventSpan(obj, T0, "a", time.Minute)
		ev.Attributes = append(ev.Attributes, aggregator.Attr{Key: "webhook", Value: "audit-side"})
		req := &aggregator.Span{TraceID: ev.TraceID, SpanID: aggregator.RequestSpanID(ev.TraceID, ev.SpanID, "0102030405060708"),
			ParentID: ev.SpanID, Kind: aggregator.KindRequest, Source: "apiserver", Name: "Call validating webhook", Object: obj, Window: T0,
			Start: ev.Start.Add(time.Millisecond), End: ev.Start.Add(1501 * time.Millisecond),
			Attributes: aggregator.Attrs{{Key: "webhook", Value: "delay.example.com"}}, Error: true}
		Export(t, s, ObjectSpan(obj, T0), ev, req)
		got, err := s.GetTrace(ctx, ev.TraceID)
		require.NoError(t, err)
		var back *aggregator.Span
		for _, sp := range got {
			if sp.Kind == aggregator.KindRequest {
				back = sp
			}
		}
		require.NotNil(t, back, "the request span is stored")
		assert.Equal(t, req.SpanID, back.SpanID)
		assert.Equal(t, ev.SpanID, back.ParentID)
		assert.Equal(t, "apiserver", back.Source)
		assert.Equal(t, "Call validating webhook", back.Name)
		assert.Equal(t, 1500*time.Millisecond, back.End.Sub(back.Start))
		assert.True(t, back.Error)
		v, _ := back.Attributes.Get("webhook")
		assert.Equal(t, "delay.example.com", v)
		// Searches match event spans: the request span's attribute finds nothing.
		res, err := s.FindObjects(ctx, query.ObjectQuery{Attributes: aggregator.Attrs{{Key: "webhook", Value: "delay.example.com"}}})
		require.NoError(t, err)
		assert.Empty(t, Keys(res))
	})

	t.Run("find objects", func(t *testing.T) {
		s := open(t)
		deploy := Ref("c1", "apps", "deployments", "ns1", "web")
		pod := Ref("c1", "", "pods", "ns1", "web-1")
		pod2 := Ref("c1", "", "pods", "ns2", "web-1")
		other := Ref("c2", "apps", "deployments", "ns1", "web")
		node := Ref("c1", "", "nodes", "", "node-1")
		w0, w1, w2 := T0, T0.Add(Win), T0.Add(2*Win)
		Export(t, s, ObjectSpan(deploy, w0), EventSpan(deploy, w0, "1", time.Minute))
		Export(t, s, EventSpan(deploy, w1, "2", time.Minute), ObjectSpan(pod, w1), ObjectSpan(pod2, w1))
		Export(t, s, ObjectSpan(other, w0), ObjectSpan(node, w2), EventSpan(node, w2, "3", 0))

		for _, tc := range []struct {
			name string
			q    query.ObjectQuery
			want []string
		}{
			{"all", query.ObjectQuery{}, []string{"c1//nodes//node-1:1", "c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"cluster", query.ObjectQuery{Cluster: "c2"}, []string{"c2/apps/deployments/ns1/web:1"}},
			{"group core", query.ObjectQuery{Cluster: "c1", Resource: "pods"}, []string{"c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1"}},
			{"group", query.ObjectQuery{Group: "apps"}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"resource", query.ObjectQuery{Resource: "nodes"}, []string{"c1//nodes//node-1:1"}},
			{"namespace", query.ObjectQuery{Namespace: "ns2"}, []string{"c1//pods/ns2/web-1:1"}},
			{"name", query.ObjectQuery{Name: "web"}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"name is exact", query.ObjectQuery{Name: "we"}, []string{}},
			{"cluster is exact", query.ObjectQuery{Cluster: "c"}, []string{}},
			{"all fields", query.ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns1", Name: "web"}, []string{"c1/apps/deployments/ns1/web:2"}},
			{"all fields, one differs", query.ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns2", Name: "web"}, []string{}},
			{"no match", query.ObjectQuery{Cluster: "c3"}, []string{}},
			{"to is inclusive", query.ObjectQuery{To: w0}, []string{"c1/apps/deployments/ns1/web:1", "c2/apps/deployments/ns1/web:1"}},
			{"before everything", query.ObjectQuery{To: w0.Add(-time.Nanosecond)}, []string{}},
			{"from inside the last window", query.ObjectQuery{From: w2.Add(Win - time.Nanosecond)}, []string{"c1//nodes//node-1:1"}},
			{"from at the end of the last window", query.ObjectQuery{From: w2.Add(Win)}, []string{}},
			{"from and to inside one window", query.ObjectQuery{From: w1.Add(time.Minute), To: w1.Add(2 * time.Minute)}, []string{"c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:1"}},
			{"from equals to", query.ObjectQuery{Name: "web", From: w1, To: w1}, []string{"c1/apps/deployments/ns1/web:1"}},
			{"range over two windows", query.ObjectQuery{Name: "web", From: w0.Add(Win - 1), To: w1}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"limit counts objects", query.ObjectQuery{Limit: 4}, []string{"c1//nodes//node-1:1", "c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:2"}},
			{"limit with filter", query.ObjectQuery{Group: "apps", Limit: 1}, []string{"c1/apps/deployments/ns1/web:2"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res, err := s.FindObjects(ctx, tc.q)
				require.NoError(t, err)
				assert.Equal(t, tc.want, Keys(res))
			})
		}

		res, err := s.FindObjects(ctx, query.ObjectQuery{Resource: "deployments", Cluster: "c1"})
		require.NoError(t, err)
		require.Len(t, res, 1)
		got := slices.Clone(res[0].Windows)
		for i := range got {
			got[i].Segments = 0 // a hint of the store's own
		}
		assert.Equal(t, []query.ObjectWindow{
			{Window: w0, TraceID: aggregator.TraceIDFor(deploy.Key(), w0)},
			{Window: w1, TraceID: aggregator.TraceIDFor(deploy.Key(), w1)},
		}, got)
		assert.Equal(t, deploy, res[0].Object)
	})

	t.Run("default limit", func(t *testing.T) {
		s := open(t)
		var spans []*aggregator.Span
		for i := range query.DefaultLimit + 5 {
			spans = append(spans, ObjectSpan(Ref("c", "", "pods", "ns", "p"+string(rune('a'+i/26))+string(rune('a'+i%26))), T0))
		}
		Export(t, s, spans...)
		res, err := s.FindObjects(ctx, query.ObjectQuery{})
		require.NoError(t, err)
		assert.Len(t, res, query.DefaultLimit)
		assert.Equal(t, "paa", res[0].Object.Name)
	})

	t.Run("object comes from the newest window's object span", func(t *testing.T) {
		s := open(t)
		if lim.ObjectSpansOnly {
			t.Skip("objects are found by their object spans, which the aggregator writes in every window")
		}
		obj := Ref("c", "", "pods", "ns", "p")
		early := obj
		early.UID = "uid-1"
		late := obj
		late.UID, late.Version = "uid-2", "v2"
		eventOnly := obj
		eventOnly.UID = "from-event"

		ev := EventSpan(eventOnly, T0.Add(Win), "e", 0)
		Export(t, s, ObjectSpan(early, T0), ev)
		res, err := s.FindObjects(ctx, query.ObjectQuery{})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, eventOnly, res[0].Object, "first span of a window without object span")

		Export(t, s, ObjectSpan(late, T0.Add(Win)), EventSpan(eventOnly, T0.Add(Win), "f", 0))
		res, err = s.FindObjects(ctx, query.ObjectQuery{})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, late, res[0].Object)

		res, err = s.FindObjects(ctx, query.ObjectQuery{To: T0})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, early, res[0].Object, "newest matching window")
	})

	t.Run("get trace", func(t *testing.T) {
		s := open(t)
		obj := Ref("c", "", "pods", "ns", "p")
		root := ObjectSpan(obj, T0)
		a := EventSpan(obj, T0, "a", 2*time.Minute)
		b := EventSpan(obj, T0, "b", time.Minute)
		c := EventSpan(obj, T0, "c", time.Minute)
		other := EventSpan(obj, T0.Add(Win), "x", 0)
		Export(t, s, a, other)
		Export(t, s, c, root, b)

		got, err := s.GetTrace(ctx, root.TraceID)
		require.NoError(t, err)
		first, second := b, c
		if string(c.SpanID[:]) < string(b.SpanID[:]) {
			first, second = c, b
		}
		want := []*aggregator.Span{root, first, second, a}
		require.Len(t, got, len(want))
		for i := range want {
			assert.Equal(t, want[i].SpanID, got[i].SpanID, "span %d", i)
			assert.True(t, want[i].Start.Equal(got[i].Start))
			assert.True(t, want[i].End.Equal(got[i].End))
			assert.Equal(t, want[i].ParentID, got[i].ParentID)
			assert.Equal(t, want[i].Attributes, got[i].Attributes)
		}

		_, err = s.GetTrace(ctx, trace.TraceID{1, 2, 3})
		assert.True(t, errors.Is(err, query.ErrNotFound), "got %v", err)
	})

	t.Run("empty export", func(t *testing.T) {
		s := open(t)
		require.NoError(t, s.Export(ctx, nil))
		res, err := s.FindObjects(ctx, query.ObjectQuery{})
		require.NoError(t, err)
		assert.Empty(t, res)
	})
}
