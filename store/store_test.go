package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC) // a window start

const win = aggregator.DefaultWindow

func ref(cluster, group, resource, namespace, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: cluster, Group: group, Version: "v1", Resource: resource, Namespace: namespace, Name: name}
}

// objectSpan is the root span of obj's trace in window w.
func objectSpan(obj aggregator.ObjectRef, w time.Time) *aggregator.Span {
	tid := aggregator.TraceIDFor(obj.Key(), w)
	return &aggregator.Span{
		TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindObject, Source: "object",
		Name: obj.Resource + "/" + obj.Name, Object: obj, Window: w, Start: w, End: w.Add(win),
	}
}

// eventSpan is an event in obj's trace in window w, starting at offset after w.
func eventSpan(obj aggregator.ObjectRef, w time.Time, id string, offset time.Duration) *aggregator.Span {
	tid := aggregator.TraceIDFor(obj.Key(), w)
	return &aggregator.Span{
		TraceID: tid, SpanID: aggregator.EventSpanID(tid, "audit", id), ParentID: aggregator.ObjectSpanID(tid),
		Kind: aggregator.KindEvent, Source: "audit", Name: "update " + id, Object: obj, Window: w,
		Start: w.Add(offset), End: w.Add(offset + time.Second),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "update"}},
	}
}

func export(t *testing.T, s Store, spans ...*aggregator.Span) {
	t.Helper()
	require.NoError(t, s.Export(context.Background(), spans))
}

// keys renders FindObjects results as "key: number of windows".
func keys(res []ObjectWindows) []string {
	out := make([]string, 0, len(res))
	for _, r := range res {
		out = append(out, r.Object.Key().String()+":"+string(rune('0'+len(r.Windows))))
	}
	return out
}

// testStore runs the behaviour every Store shares. open returns an empty store.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("upsert keeps one span per ID", func(t *testing.T) {
		s := open(t)
		obj := ref("c1", "apps", "deployments", "ns", "web")
		first := eventSpan(obj, t0, "a", time.Minute)
		second := *first
		second.Name = "renamed"
		export(t, s, first, objectSpan(obj, t0))
		export(t, s, &second, objectSpan(obj, t0))
		export(t, s, &second) // again, in its own batch

		got, err := s.GetTrace(ctx, first.TraceID)
		require.NoError(t, err)
		require.Len(t, got, 2)
		assert.Equal(t, aggregator.KindObject, got[0].Kind)
		assert.Equal(t, "renamed", got[1].Name)

		res, err := s.FindObjects(ctx, ObjectQuery{})
		require.NoError(t, err)
		assert.Equal(t, []string{"c1/apps/deployments/ns/web:1"}, keys(res))
	})

	t.Run("find objects", func(t *testing.T) {
		s := open(t)
		deploy := ref("c1", "apps", "deployments", "ns1", "web")
		pod := ref("c1", "", "pods", "ns1", "web-1")
		pod2 := ref("c1", "", "pods", "ns2", "web-1")
		other := ref("c2", "apps", "deployments", "ns1", "web")
		node := ref("c1", "", "nodes", "", "node-1")
		w0, w1, w2 := t0, t0.Add(win), t0.Add(2*win)
		export(t, s, objectSpan(deploy, w0), eventSpan(deploy, w0, "1", time.Minute))
		export(t, s, eventSpan(deploy, w1, "2", time.Minute), objectSpan(pod, w1), objectSpan(pod2, w1))
		export(t, s, objectSpan(other, w0), objectSpan(node, w2), eventSpan(node, w2, "3", 0))

		for _, tc := range []struct {
			name string
			q    ObjectQuery
			want []string
		}{
			{"all", ObjectQuery{}, []string{"c1//nodes//node-1:1", "c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"cluster", ObjectQuery{Cluster: "c2"}, []string{"c2/apps/deployments/ns1/web:1"}},
			{"group core", ObjectQuery{Cluster: "c1", Resource: "pods"}, []string{"c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1"}},
			{"group", ObjectQuery{Group: "apps"}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"resource", ObjectQuery{Resource: "nodes"}, []string{"c1//nodes//node-1:1"}},
			{"namespace", ObjectQuery{Namespace: "ns2"}, []string{"c1//pods/ns2/web-1:1"}},
			{"name", ObjectQuery{Name: "web"}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"name is exact", ObjectQuery{Name: "we"}, []string{}},
			{"cluster is exact", ObjectQuery{Cluster: "c"}, []string{}},
			{"all fields", ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns1", Name: "web"}, []string{"c1/apps/deployments/ns1/web:2"}},
			{"all fields, one differs", ObjectQuery{Cluster: "c1", Group: "apps", Resource: "deployments", Namespace: "ns2", Name: "web"}, []string{}},
			{"no match", ObjectQuery{Cluster: "c3"}, []string{}},
			{"to is inclusive", ObjectQuery{To: w0}, []string{"c1/apps/deployments/ns1/web:1", "c2/apps/deployments/ns1/web:1"}},
			{"before everything", ObjectQuery{To: w0.Add(-time.Nanosecond)}, []string{}},
			{"from inside the last window", ObjectQuery{From: w2.Add(win - time.Nanosecond)}, []string{"c1//nodes//node-1:1"}},
			{"from at the end of the last window", ObjectQuery{From: w2.Add(win)}, []string{}},
			{"from and to inside one window", ObjectQuery{From: w1.Add(time.Minute), To: w1.Add(2 * time.Minute)}, []string{"c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:1"}},
			{"from equals to", ObjectQuery{Name: "web", From: w1, To: w1}, []string{"c1/apps/deployments/ns1/web:1"}},
			{"range over two windows", ObjectQuery{Name: "web", From: w0.Add(win - 1), To: w1}, []string{"c1/apps/deployments/ns1/web:2", "c2/apps/deployments/ns1/web:1"}},
			{"limit counts objects", ObjectQuery{Limit: 4}, []string{"c1//nodes//node-1:1", "c1//pods/ns1/web-1:1", "c1//pods/ns2/web-1:1", "c1/apps/deployments/ns1/web:2"}},
			{"limit with filter", ObjectQuery{Group: "apps", Limit: 1}, []string{"c1/apps/deployments/ns1/web:2"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				res, err := s.FindObjects(ctx, tc.q)
				require.NoError(t, err)
				assert.Equal(t, tc.want, keys(res))
			})
		}

		res, err := s.FindObjects(ctx, ObjectQuery{Resource: "deployments", Cluster: "c1"})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, []ObjectWindow{
			{Window: w0, TraceID: aggregator.TraceIDFor(deploy.Key(), w0)},
			{Window: w1, TraceID: aggregator.TraceIDFor(deploy.Key(), w1)},
		}, res[0].Windows)
		assert.Equal(t, deploy, res[0].Object)
	})

	t.Run("default limit", func(t *testing.T) {
		s := open(t)
		var spans []*aggregator.Span
		for i := range DefaultLimit + 5 {
			spans = append(spans, objectSpan(ref("c", "", "pods", "ns", "p"+string(rune('a'+i/26))+string(rune('a'+i%26))), t0))
		}
		export(t, s, spans...)
		res, err := s.FindObjects(ctx, ObjectQuery{})
		require.NoError(t, err)
		assert.Len(t, res, DefaultLimit)
		assert.Equal(t, "paa", res[0].Object.Name)
	})

	t.Run("object comes from the newest window's object span", func(t *testing.T) {
		s := open(t)
		skipJaeger(t, s, "objects are found by their object spans, which the aggregator writes in every window")
		obj := ref("c", "", "pods", "ns", "p")
		early := obj
		early.UID = "uid-1"
		late := obj
		late.UID, late.Version = "uid-2", "v2"
		eventOnly := obj
		eventOnly.UID = "from-event"

		ev := eventSpan(eventOnly, t0.Add(win), "e", 0)
		export(t, s, objectSpan(early, t0), ev)
		res, err := s.FindObjects(ctx, ObjectQuery{})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, eventOnly, res[0].Object, "first span of a window without object span")

		export(t, s, objectSpan(late, t0.Add(win)), eventSpan(eventOnly, t0.Add(win), "f", 0))
		res, err = s.FindObjects(ctx, ObjectQuery{})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, late, res[0].Object)

		res, err = s.FindObjects(ctx, ObjectQuery{To: t0})
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, early, res[0].Object, "newest matching window")
	})

	t.Run("get trace", func(t *testing.T) {
		s := open(t)
		obj := ref("c", "", "pods", "ns", "p")
		root := objectSpan(obj, t0)
		a := eventSpan(obj, t0, "a", 2*time.Minute)
		b := eventSpan(obj, t0, "b", time.Minute)
		c := eventSpan(obj, t0, "c", time.Minute)
		other := eventSpan(obj, t0.Add(win), "x", 0)
		export(t, s, a, other)
		export(t, s, c, root, b)

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
		assert.True(t, errors.Is(err, ErrNotFound), "got %v", err)
	})

	t.Run("empty export", func(t *testing.T) {
		s := open(t)
		require.NoError(t, s.Export(ctx, nil))
		res, err := s.FindObjects(ctx, ObjectQuery{})
		require.NoError(t, err)
		assert.Empty(t, res)
	})
}

func TestMemory(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return NewMemory(MemoryConfig{}, 0) })
}

func TestPebble(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestPebble(t, PebbleConfig{}, nil) })
}
