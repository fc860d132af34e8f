package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

var w0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC) // a window start

const win = aggregator.DefaultWindow

func obj(resource, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: resource, Namespace: "ns", Name: name}
}

// world builds stored spans by hand, shaped as the aggregator writes them.
type world struct{ spans []*aggregator.Span }

func (w *world) object(o aggregator.ObjectRef, window time.Time) {
	w.spans = append(w.spans, benchdata.ObjectSpan(o, window))
}

func (w *world) event(o aggregator.ObjectRef, at time.Time, id string, attrs ...aggregator.Attr) {
	sp := benchdata.EventSpan(o, at, id)
	sp.Attributes = append(sp.Attributes, attrs...)
	w.spans = append(w.spans, sp)
}

// link writes both link spans of parent -> child in window, and the object spans.
func (w *world) link(parent, child aggregator.ObjectRef, window time.Time, class string) {
	w.spans = append(w.spans, benchdata.LinkSpans(parent, child, window, class)...)
	w.object(parent, window)
	w.object(child, window)
}

func (w *world) store(t *testing.T, seed uint64) *memory.Store {
	t.Helper()
	spans := append([]*aggregator.Span(nil), w.spans...)
	if seed != 0 {
		rng := rand.New(rand.NewPCG(seed, seed))
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	}
	st := memory.New(memory.Config{}, 0)
	require.NoError(t, st.Export(context.Background(), spans))
	return st
}

func search(t *testing.T, st store.Reader, cfg query.Config, q query.Query, mode query.LinkMode) []*query.Graph {
	t.Helper()
	gs, err := query.NewEngine(st, 0, cfg).Search(context.Background(), q, mode)
	require.NoError(t, err)
	return gs
}

func childNames(g *query.Graph, parent aggregator.ObjectRef) []string {
	var out []string
	for _, e := range g.Children[parent.Key()] {
		out = append(out, e.Child.Name)
	}
	return out
}

func TestBudgetsAreVisible(t *testing.T) {
	dep := obj("deployments", "d")
	var w world
	w.event(dep, w0.Add(time.Minute), "d")
	for _, rs := range []string{"r1", "r2", "r3", "r4", "r5"} {
		w.link(dep, obj("replicasets", rs), w0, "children")
		for _, p := range []string{"a", "b"} {
			w.link(obj("replicasets", rs), obj("pods", rs+p), w0, "children")
		}
	}
	st := w.store(t, 1)
	q := query.Query{Resource: "deployments", Name: "d"}

	gs := search(t, st, query.Config{PerLevel: 2}, q, query.LinkDescendants)
	require.Len(t, gs, 1)
	g := gs[0]
	assert.Equal(t, []string{"r1", "r2"}, childNames(g, dep), "sorted edges, the first ones kept")
	assert.Equal(t, 3, g.Omitted[dep.Key()])
	assert.Equal(t, []string{"r1a", "r1b"}, childNames(g, obj("replicasets", "r1")))
	assert.Empty(t, childNames(g, obj("replicasets", "r2")), "the level budget is spent on r1's pods")
	assert.Equal(t, 2, g.Omitted[obj("replicasets", "r2").Key()])

	gs = search(t, st, query.Config{Total: 6}, q, query.LinkDescendants)
	g = gs[0]
	assert.Len(t, g.Objects, 7, "the found object and 6 more")
	assert.Equal(t, 10-1, g.Omitted[obj("replicasets", "r3").Key()]+g.Omitted[obj("replicasets", "r4").Key()]+
		g.Omitted[obj("replicasets", "r5").Key()]+g.Omitted[obj("replicasets", "r1").Key()]+g.Omitted[obj("replicasets", "r2").Key()])

	gs = search(t, st, query.Config{Depth: 1}, q, query.LinkDescendants)
	g = gs[0]
	assert.Len(t, g.Objects, 6)
	assert.Equal(t, 2, g.Omitted[obj("replicasets", "r1").Key()], "the depth cut is shown too")

	// The omission is a span.
	tr := query.Render(gs[0], query.DisplayTracing, aggregator.TraceIDFor(dep.Key(), w0))
	var omitted []string
	for _, s := range tr.Spans {
		if tagOf(s, "kelemetry.span.kind") == "omitted" {
			omitted = append(omitted, s.OperationName)
		}
	}
	assert.Equal(t, []string{"2 more objects omitted", "2 more objects omitted", "2 more objects omitted", "2 more objects omitted", "2 more objects omitted"}, omitted)

	// Ancestors are selected before the budget: a ReplicaSet with many pods keeps its owner.
	gs = search(t, st, query.Config{PerLevel: 1, Total: 1}, query.Query{Resource: "replicasets", Name: "r3"}, query.LinkAncestors)
	require.Len(t, gs, 1)
	assert.Equal(t, []aggregator.ObjectKey{dep.Key()}, gs[0].Roots)
	assert.Equal(t, []string{"r3"}, childNames(gs[0], dep), "siblings are not followed")
}

func TestTwoParents(t *testing.T) {
	top, b, c, p := obj("things", "top"), obj("things", "b"), obj("things", "c"), obj("pods", "p")
	var w world
	w.event(top, w0.Add(time.Minute), "top")
	w.link(top, b, w0, "children")
	w.link(top, c, w0, "children")
	w.link(b, p, w0, "")
	w.link(c, p, w0, "children")
	st := w.store(t, 2)
	gs := search(t, st, query.Config{}, query.Query{Resource: "things", Name: "top"}, query.LinkDescendants)
	require.Len(t, gs, 1)
	g := gs[0]
	assert.Equal(t, []string{"p"}, childNames(g, c), "the owner-class link wins")
	assert.Empty(t, childNames(g, b))
	require.Len(t, g.References[b.Key()], 1)
	assert.Equal(t, p.Key(), g.References[b.Key()][0].Child)

	tr := query.Render(g, query.DisplayTree, aggregator.TraceIDFor(top.Key(), w0))
	var pid string
	for _, s := range tr.Spans {
		if tagOf(s, "kelemetry.span.kind") == "object" && tagOf(s, "name") == "p" {
			pid = s.SpanID
		}
	}
	var ref *query.JaegerSpan
	for i, s := range tr.Spans {
		if tagOf(s, "kelemetry.span.kind") == "reference" {
			ref = &tr.Spans[i]
		}
	}
	require.NotNil(t, ref)
	require.Len(t, ref.References, 2)
	assert.Equal(t, "FOLLOWS_FROM", ref.References[1].RefType)
	assert.Equal(t, pid, ref.References[1].SpanID)
	rootOf(t, tr)
}

func TestCycleAndMultipleRoots(t *testing.T) {
	a, b, x, p := obj("things", "a"), obj("things", "b"), obj("things", "x"), obj("pods", "p")
	var w world
	w.event(a, w0.Add(time.Minute), "a")
	w.link(a, b, w0, "children")
	w.link(b, a, w0, "children") // a cycle
	w.link(x, p, w0, "children")
	w.link(a, p, w0, "children")
	st := w.store(t, 3)
	for _, mode := range []query.LinkMode{query.LinkFullTree, query.LinkAncestors, query.LinkDescendants} {
		gs := search(t, st, query.Config{}, query.Query{Resource: "pods", Name: "p"}, mode)
		require.Len(t, gs, 1)
		for _, d := range []query.DisplayMode{query.DisplayTracing, query.DisplayGrouped, query.DisplayTree, query.DisplayTimeline} {
			tr := query.Render(gs[0], d, aggregator.TraceIDFor(p.Key(), w0))
			rootOf(t, tr)
		}
	}
	gs := search(t, st, query.Config{}, query.Query{Resource: "pods", Name: "p"}, query.LinkAncestors)
	assert.Len(t, gs[0].Roots, 2, "p has two unrelated owners")
	tr := query.Render(gs[0], query.DisplayTracing, aggregator.TraceIDFor(p.Key(), w0))
	assert.Equal(t, "root", tagOf(rootOf(t, tr), "kelemetry.span.kind"), "a synthetic root holds both")
}

func TestMissingRootSpanAndMergedWindows(t *testing.T) {
	pod := obj("pods", "p")
	var w world
	// Window 0 lost its object span; window 1 has it; window 2 has only an event.
	w.event(pod, w0.Add(time.Minute), "1")
	w.object(pod, w0.Add(win))
	w.event(pod, w0.Add(win+time.Minute), "2")
	w.event(pod, w0.Add(2*win+time.Minute), "3")
	st := w.store(t, 0)
	gs := search(t, st, query.Config{}, query.Query{Name: "p", From: w0, To: w0.Add(3 * win)}, query.LinkFullTree)
	require.Len(t, gs, 1)
	o := gs[0].Objects[pod.Key()]
	assert.False(t, o.Synthetic, "one window had the object span")
	assert.Len(t, o.Windows, 3)
	assert.Len(t, o.Events, 3)
	tr := query.Render(gs[0], query.DisplayTracing, aggregator.TraceIDFor(pod.Key(), w0))
	require.Len(t, tr.Spans, 1, "windows merge into one span")
	assert.Len(t, tr.Spans[0].Logs, 3)

	// No window has it.
	var w2 world
	w2.event(pod, w0.Add(time.Minute), "1")
	gs = search(t, w2.store(t, 0), query.Config{}, query.Query{Name: "p"}, query.LinkNone)
	require.Len(t, gs, 1)
	assert.True(t, gs[0].Objects[pod.Key()].Synthetic)
	for _, d := range []query.DisplayMode{query.DisplayTracing, query.DisplayGrouped, query.DisplayTree, query.DisplayTimeline} {
		tr := query.Render(gs[0], d, aggregator.TraceIDFor(pod.Key(), w0))
		root := rootOf(t, tr)
		assert.NotEmpty(t, root.Warnings)
	}
}

func TestClippingIsInclusive(t *testing.T) {
	pod := obj("pods", "p")
	from, to := w0.Add(10*time.Minute), w0.Add(20*time.Minute)
	var w world
	w.object(pod, w0)
	w.event(pod, from.Add(-time.Nanosecond), "before")
	w.event(pod, from, "first")
	w.event(pod, to, "last")
	w.event(pod, to.Add(time.Nanosecond), "after")
	gs := search(t, w.store(t, 0), query.Config{}, query.Query{Name: "p", From: from, To: to}, query.LinkNone)
	require.Len(t, gs, 1)
	o := gs[0].Objects[pod.Key()]
	var names []string
	for _, ev := range o.Events {
		names = append(names, ev.Name)
	}
	assert.Equal(t, []string{"alice update first", "alice update last"}, names)
	assert.Equal(t, from, o.Start)
	assert.Equal(t, to, o.End)
}

func TestFindLinkedObjectWithoutEventsAndLimit(t *testing.T) {
	dep, rs, pod := obj("deployments", "d"), obj("replicasets", "r"), obj("pods", "p")
	var w world
	w.event(dep, w0.Add(time.Minute), "d")
	// In the next window only the pod has events; the aggregator linked it up the chain.
	w.event(pod, w0.Add(win+time.Minute), "p", aggregator.Attr{Key: aggregator.AttrVerb, Value: "delete"})
	w.link(rs, pod, w0.Add(win), "children")
	w.link(dep, rs, w0.Add(win), "children")
	st := w.store(t, 4)
	from, to := w0.Add(win), w0.Add(2*win-1)

	gs := search(t, st, query.Config{}, query.Query{Resource: "deployments", Name: "d", From: from, To: to}, query.LinkNone)
	require.Len(t, gs, 1, "the Deployment has no events in the range but is linked")

	gs = search(t, st, query.Config{}, query.Query{Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "delete"}}, From: from, To: to}, query.LinkFullTree)
	require.Len(t, gs, 1)
	assert.Equal(t, []aggregator.ObjectKey{dep.Key()}, gs[0].Roots)
	assert.Len(t, gs[0].Objects, 3)
	assert.Equal(t, []aggregator.ObjectKey{pod.Key()}, gs[0].Seeds)

	// The limit counts objects: three objects with two windows each.
	gs = search(t, st, query.Config{}, query.Query{Cluster: "c", Limit: 2}, query.LinkNone)
	assert.Len(t, gs, 2)
	// Objects that share a tree merge into one result.
	gs = search(t, st, query.Config{}, query.Query{Cluster: "c", Limit: 3, From: from, To: to}, query.LinkFullTree)
	require.Len(t, gs, 1)
	assert.Len(t, gs[0].Seeds, 3)
}

func TestDeterministic(t *testing.T) {
	dep := obj("deployments", "d")
	var w world
	w.event(dep, w0.Add(time.Minute), "d")
	for _, rs := range []string{"r3", "r1", "r2"} {
		w.link(dep, obj("replicasets", rs), w0, "children")
		w.event(obj("replicasets", rs), w0.Add(2*time.Minute), rs)
		for _, p := range []string{"b", "a"} {
			w.link(obj("replicasets", rs), obj("pods", rs+p), w0, "children")
			w.event(obj("pods", rs+p), w0.Add(3*time.Minute), rs+p)
		}
	}
	var first []byte
	for seed := uint64(1); seed <= 5; seed++ {
		st := w.store(t, seed)
		for _, d := range []query.DisplayMode{query.DisplayTracing, query.DisplayTimeline} {
			gs := search(t, st, query.Config{PerLevel: 4}, query.Query{Resource: "pods", Name: "r2a"}, query.LinkFullTree)
			require.Len(t, gs, 1)
			b, err := json.Marshal(query.Render(gs[0], d, aggregator.TraceIDFor(dep.Key(), w0)))
			require.NoError(t, err)
			if d == query.DisplayTracing {
				if first == nil {
					first = b
				}
				assert.Equal(t, string(first), string(b), "seed %d", seed)
			}
		}
	}
}

// TestIDsSurviveRestart resolves a display ID with a new API over a reopened Pebble store.
func TestIDsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dep, rs := obj("deployments", "d"), obj("replicasets", "r")
	var w world
	w.event(dep, w0.Add(time.Minute), "d")
	w.event(rs, w0.Add(win+time.Minute), "r")
	w.link(dep, rs, w0, "children")
	w.link(dep, rs, w0.Add(win), "children")

	st, err := pebble.Open(ctx, pebble.Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, st.Export(ctx, w.spans))
	_, srv := newAPI(t, st)
	u := srv.URL + "/api/traces?service=" + url.QueryEscape("tracing [ancestors]") + "&tag=resource:replicasets&start=" +
		strconv.FormatInt(w0.UnixMicro(), 10) + "&end=" + strconv.FormatInt(w0.Add(2*win).UnixMicro(), 10)
	before := traces(t, u)
	require.Len(t, before, 1)
	srv.Close()
	require.NoError(t, st.Stop(ctx))

	st, err = pebble.Open(ctx, pebble.Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Stop(context.Background()) })
	_, srv = newAPI(t, st)
	after := traces(t, srv.URL+"/api/traces/"+before[0].TraceID)
	require.Len(t, after, 1)
	a, _ := json.Marshal(after[0])
	b, _ := json.Marshal(before[0])
	assert.JSONEq(t, string(b), string(a))
	root := rootOf(t, after[0])
	assert.Equal(t, "deployments", tagOf(root, "resource"))
	require.Len(t, childrenOf(after[0], root.SpanID), 1)
	assert.Len(t, root.Logs, 1, "the Deployment's event, both windows merged")
}

// TestFoldedLogFields checks how tracing folds an event's attributes and logs into fields.
func TestFoldedLogFields(t *testing.T) {
	pod := obj("pods", "p")
	var w world
	w.object(pod, w0)
	w.event(pod, w0.Add(time.Minute), "1", aggregator.Attr{Key: aggregator.AttrUserAgent, Value: "kubectl"}, aggregator.Attr{Key: aggregator.AttrSourceIP, Value: "10.0.0.1"})
	ev := w.spans[len(w.spans)-1]
	ev.Error = true
	ev.Logs = []aggregator.Log{
		{Type: aggregator.LogTypeDiff, Message: "status.observedGeneration 1 -> 2"},
		{Type: aggregator.LogTypeDiff, Message: "metadata.managedFields[0].time \"a\" -> \"b\""},
		{Type: aggregator.LogTypeDiff, Message: "metadata.resourceVersion \"1\" -> \"2\"\nspec.replicas 1 -> 2\n"},
		{Type: aggregator.LogTypeSnapshot, Message: `{"metadata":{"name":"p"}}`},
		{Type: aggregator.LogTypeError, Message: "Conflict: try again"},
		{Type: aggregator.LogTypeCause, Message: "field: bad"},
		{Type: aggregator.LogTypeInternal, Message: "cache miss"},
	}
	gs := search(t, w.store(t, 0), query.Config{}, query.Query{Name: "p"}, query.LinkNone)
	require.Len(t, gs, 1)
	tr := query.Render(gs[0], query.DisplayTracing, aggregator.TraceIDFor(pod.Key(), w0))
	require.Len(t, tr.Spans, 1)
	require.Len(t, tr.Spans[0].Logs, 1)
	fields := map[string]any{}
	var keys []string
	for _, f := range tr.Spans[0].Logs[0].Fields {
		fields[f.Key] = f.Value
		keys = append(keys, f.Key)
	}
	assert.Equal(t, []string{"audit", "user", "userAgent", "sourceIP", "diff", "verbose diff", "snapshot", "error", "_debug"}, keys)
	assert.Equal(t, "alice update 1", fields["audit"])
	assert.Equal(t, "alice", fields["user"])
	assert.Equal(t, "status.observedGeneration 1 -> 2\nspec.replicas 1 -> 2", fields["diff"], "managed fields hidden")
	assert.Equal(t, "metadata.resourceVersion \"1\" -> \"2\"", fields["verbose diff"])
	assert.Equal(t, `{"metadata":{"name":"p"}}`, fields["snapshot"])
	assert.Equal(t, "Conflict: try again\nfield: bad", fields["error"])
	assert.Equal(t, w0.Add(time.Minute).UnixMicro(), tr.Spans[0].Logs[0].Timestamp)

	// In tree mode the same event is a child span with its raw logs and all attributes.
	tr = query.Render(gs[0], query.DisplayTree, aggregator.TraceIDFor(pod.Key(), w0))
	require.Len(t, tr.Spans, 2)
	assert.Len(t, tr.Spans[1].Logs, 7)
	assert.Equal(t, "kubectl", tagOf(tr.Spans[1], aggregator.AttrUserAgent))
	assert.Contains(t, tr.Spans[1].Tags, query.JaegerKeyValue{Key: "error", Type: "bool", Value: true})

	// Grouped: the audit logs move to a child span named after the source.
	tr = query.Render(gs[0], query.DisplayGrouped, aggregator.TraceIDFor(pod.Key(), w0))
	require.Len(t, tr.Spans, 2)
	assert.Empty(t, tr.Spans[0].Logs)
	assert.Equal(t, "audit", tr.Spans[1].OperationName)
	assert.Len(t, tr.Spans[1].Logs, 1)
}

// TestTreeOfRandomLinks: over random links between a dozen objects (several parents each,
// cycles), every object is drawn exactly once, under one parent or as a root, and each
// object's children are in the order of their keys.
func TestTreeOfRandomLinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 30 {
		var objs []aggregator.ObjectRef
		for i := range 12 {
			objs = append(objs, obj([]string{"pods", "things"}[rng.IntN(2)], fmt.Sprintf("o%02d", (i*7)%12)))
		}
		var w world
		for _, o := range objs {
			w.event(o, w0.Add(time.Minute), "e")
		}
		for range 20 {
			p, c := objs[rng.IntN(len(objs))], objs[rng.IntN(len(objs))]
			if p != c {
				w.link(p, c, w0, []string{"children", ""}[rng.IntN(2)])
			}
		}
		gs := search(t, w.store(t, uint64(round)), query.Config{}, query.Query{Resource: objs[0].Resource, Name: objs[0].Name}, query.LinkFullTree)
		require.Len(t, gs, 1)
		g := gs[0]
		seen := map[aggregator.ObjectKey]int{}
		for _, r := range g.Roots {
			seen[r]++
		}
		for parent, es := range g.Children {
			require.True(t, slices.IsSortedFunc(es, func(a, b query.Edge) int { return strings.Compare(a.Child.String(), b.Child.String()) }),
				"round %d: children of %s out of order", round, parent)
			for _, e := range es {
				require.Equal(t, parent, e.Parent)
				seen[e.Child]++
			}
		}
		for k := range g.Objects {
			require.Equal(t, 1, seen[k], "round %d: %s drawn %d times", round, k, seen[k])
		}
	}
}
