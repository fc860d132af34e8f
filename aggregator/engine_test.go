package aggregator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

var (
	deploy = aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "default", Name: "web"}
	rs     = aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "default", Name: "web-1"}
	pod    = aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "pods", Namespace: "default", Name: "web-1-a"}
	base   = time.Date(2026, 11, 29, 17, 5, 0, 0, time.UTC)
)

func event(obj aggregator.ObjectRef, id string, at time.Time) *aggregator.Event {
	return &aggregator.Event{
		Object: aggregator.Object{ObjectRef: obj},
		Source: "audit", ID: id, Title: "admin update " + id,
		Start: at, End: at.Add(10 * time.Millisecond),
	}
}

func newEngine(t *testing.T, cfg aggregator.Config, deps aggregator.Deps) *aggregator.Engine {
	t.Helper()
	e, err := aggregator.New(cfg, deps)
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

func byKind(spans []*aggregator.Span, kind aggregator.SpanKind) []*aggregator.Span {
	var out []*aggregator.Span
	for _, s := range spans {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

func TestWindowStartIsEpochAligned(t *testing.T) {
	for _, tc := range []struct {
		at     time.Time
		length time.Duration
		want   time.Time
	}{
		{base, 30 * time.Minute, time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)},
		{base.Add(30 * time.Minute), 30 * time.Minute, time.Date(2026, 11, 29, 17, 30, 0, 0, time.UTC)},
		{time.Unix(7*60+5, 0), 7 * time.Minute, time.Unix(7*60, 0).UTC()},
		{time.Unix(-1, 0), time.Minute, time.Unix(-60, 0).UTC()},
		{base, 0, time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)},
	} {
		assert.Equal(t, tc.want, aggregator.WindowStart(tc.at, tc.length), "%s in %s windows", tc.at, tc.length)
	}
}

func TestIDsAreDeterministicAndDistinct(t *testing.T) {
	w := aggregator.WindowStart(base, time.Hour)
	a := aggregator.TraceIDFor(deploy.Key(), w)
	assert.Equal(t, a, aggregator.TraceIDFor(deploy.Key(), w))
	assert.NotEqual(t, a, aggregator.TraceIDFor(rs.Key(), w))
	assert.NotEqual(t, a, aggregator.TraceIDFor(deploy.Key(), w.Add(time.Hour)))
	// Version and UID are not part of the identity.
	d2 := deploy
	d2.Version, d2.UID = "v2", "x"
	assert.Equal(t, a, aggregator.TraceIDFor(d2.Key(), w))
	// Keys whose parts concatenate alike still differ.
	k1 := aggregator.ObjectKey{Cluster: "a", Resource: "b/c", Name: "d"}
	k2 := aggregator.ObjectKey{Cluster: "a", Resource: "b", Namespace: "c", Name: "d"}
	assert.NotEqual(t, aggregator.TraceIDFor(k1, w), aggregator.TraceIDFor(k2, w))

	ids := map[string]bool{
		aggregator.ObjectSpanID(a).String():                                 true,
		aggregator.LinkSpanID(a, rs.Key(), aggregator.RoleChild).String():   true,
		aggregator.LinkSpanID(a, rs.Key(), aggregator.RoleParent).String():  true,
		aggregator.LinkSpanID(a, pod.Key(), aggregator.RoleChild).String():  true,
		aggregator.EventSpanID(a, "audit", "id1/ResponseComplete").String(): true,
		aggregator.EventSpanID(a, "event", "id1/ResponseComplete").String(): true,
		aggregator.EventSpanID(a, "audit", "id2/ResponseComplete").String(): true,
	}
	assert.Len(t, ids, 7)
}

func TestSendEmitsObjectSpanOncePerWindow(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Window: aggregator.Window(time.Minute), Sinks: []aggregator.Sink{sink}})
	ctx := context.Background()

	require.NoError(t, e.Send(ctx, event(deploy, "a", base)))
	require.NoError(t, e.Send(ctx, event(deploy, "b", base.Add(10*time.Second))))
	require.NoError(t, e.Send(ctx, event(deploy, "c", base.Add(time.Minute))))

	spans := sink.Spans()
	assert.Equal(t, len(spans), sink.Exported(), "no span exported twice")
	objs := byKind(spans, aggregator.KindObject)
	require.Len(t, objs, 2, "one object span per window")
	assert.Equal(t, base, objs[0].Start)
	assert.Equal(t, base.Add(time.Minute), objs[0].End)
	assert.Equal(t, "deployments/web", objs[0].Name)
	assert.NotEqual(t, objs[0].TraceID, objs[1].TraceID)

	evs := byKind(spans, aggregator.KindEvent)
	require.Len(t, evs, 3)
	assert.Equal(t, objs[0].TraceID, evs[0].TraceID)
	assert.Equal(t, objs[0].SpanID, evs[0].ParentID)
	assert.Equal(t, objs[0].TraceID, evs[1].TraceID)
	assert.Equal(t, objs[1].TraceID, evs[2].TraceID)
	assert.Equal(t, "admin update a", evs[0].Name)
	assert.Equal(t, base.Add(10*time.Millisecond), evs[0].End)
}

func TestSendIsIdempotent(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	ctx := context.Background()
	for range 2 { // two processes (or a restart) see the same input
		e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}})
		require.NoError(t, e.Send(ctx, event(deploy, "a", base)))
		require.NoError(t, e.Send(ctx, event(deploy, "a", base)))
	}
	assert.Len(t, sink.Spans(), 2, "one object span and one event span")
	assert.Equal(t, 6, sink.Exported(), "each process exports its object span once and every event")
}

func TestSendRejectsInvalidEvents(t *testing.T) {
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{})
	ctx := context.Background()
	noName := event(deploy, "a", base)
	noName.Object.Name = ""
	noTime := event(deploy, "a", time.Time{})
	noID := event(deploy, "", base)
	for _, ev := range []*aggregator.Event{nil, noName, noTime, noID} {
		assert.ErrorIs(t, e.Send(ctx, ev), aggregator.ErrInvalidEvent)
	}
}

func TestSendReportsSinkErrorsButFeedsOtherSinks(t *testing.T) {
	bad := &aggregatortest.RecordingSink{Err: fmt.Errorf("disk on fire")}
	good := &aggregatortest.RecordingSink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{bad, good}})
	err := e.Send(context.Background(), event(deploy, "a", base))
	require.ErrorContains(t, err, "disk on fire")
	assert.Len(t, good.Spans(), 2)
}

type namedDecorator struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (d namedDecorator) Name() string { return d.name }
func (d namedDecorator) Decorate(_ context.Context, sp *aggregator.Span) {
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.log = append(*d.log, d.name)
	sp.Attributes = append(sp.Attributes, aggregator.Attr{Key: "decorated.by", Value: d.name})
}

func TestDecoratorsRunInNameOrder(t *testing.T) {
	var mu sync.Mutex
	var order []string
	sink := &aggregatortest.RecordingSink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{
		Sinks: []aggregator.Sink{sink},
		Decorators: []aggregator.Decorator{
			namedDecorator{"zeta", &mu, &order}, namedDecorator{"alpha", &mu, &order}, namedDecorator{"mid", &mu, &order},
		},
	})
	require.NoError(t, e.Send(context.Background(), event(deploy, "a", base)))
	assert.Equal(t, []string{"alpha", "alpha", "mid", "mid", "zeta", "zeta"}, order)
	ev := byKind(sink.Spans(), aggregator.KindEvent)[0]
	v, ok := ev.Attributes.Get("decorated.by")
	assert.True(t, ok)
	assert.Equal(t, "alpha", v)
}

func ownerChain() *aggregatortest.StaticLinker {
	return &aggregatortest.StaticLinker{Links: map[aggregator.ObjectKey][]aggregator.Link{
		pod.Key(): {{Target: rs, Role: aggregator.RoleParent, Class: "children"}},
		rs.Key():  {{Target: deploy, Role: aggregator.RoleParent, Class: "children"}},
	}}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond)
}

func linkSpans(spans []*aggregator.Span) map[string]*aggregator.Span {
	out := map[string]*aggregator.Span{}
	for _, s := range byKind(spans, aggregator.KindLink) {
		out[s.Object.Name+"->"+s.Link.Target.Name+":"+string(s.Link.Role)] = s
	}
	return out
}

func TestLinksAreTransitiveWithBothDirections(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	linker := ownerChain()
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{linker}})
	require.NoError(t, e.Send(context.Background(), event(pod, "a", base)))
	require.NoError(t, e.Stop(context.Background()))

	links := linkSpans(sink.Spans())
	require.Len(t, links, 4, "%v", links)
	up := links["web-1-a->web-1:parent"]
	require.NotNil(t, up)
	assert.Equal(t, aggregator.TraceIDFor(pod.Key(), aggregator.WindowStart(base, aggregator.DefaultWindow)), up.TraceID)
	assert.Equal(t, aggregator.ObjectSpanID(up.TraceID), up.ParentID)
	assert.Equal(t, "children", up.Link.Class)
	role, _ := up.Attributes.Get(aggregator.AttrLinkRole)
	assert.Equal(t, "parent", role)
	down := links["web-1->web-1-a:child"]
	require.NotNil(t, down)
	assert.Equal(t, aggregator.TraceIDFor(rs.Key(), aggregator.WindowStart(base, aggregator.DefaultWindow)), down.TraceID)
	assert.NotNil(t, links["web-1->web:parent"])
	assert.NotNil(t, links["web->web-1:child"])

	objs := byKind(sink.Spans(), aggregator.KindObject)
	assert.Len(t, objs, 3, "the linked ReplicaSet and Deployment get object spans")
	assert.ElementsMatch(t, []aggregator.ObjectKey{pod.Key(), rs.Key(), deploy.Key()}, linker.Calls())

	assert.Equal(t, "deployments.apps/web ns=default\n  replicasets.apps/web-1 ns=default (children)\n    pods/web-1-a ns=default (children)\n      - audit: admin update a\n",
		aggregatortest.RenderTrees(sink.Spans()))
}

func TestLinkDepthLimit(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	linker := ownerChain()
	e := newEngine(t, aggregator.Config{LinkDepth: 1}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{linker}})
	require.NoError(t, e.Send(context.Background(), event(pod, "a", base)))
	require.NoError(t, e.Stop(context.Background()))
	assert.Equal(t, []aggregator.ObjectKey{pod.Key()}, linker.Calls(), "the ReplicaSet's linkers do not run")
	assert.Len(t, linkSpans(sink.Spans()), 2)
}

func TestLinkersRunOncePerWindowAndAgainWhenBodyArrives(t *testing.T) {
	linker := ownerChain()
	e := newEngine(t, aggregator.Config{LinkDepth: 1}, aggregator.Deps{Linkers: []aggregator.Linker{linker}})
	ctx := context.Background()
	require.NoError(t, e.Send(ctx, event(pod, "a", base)))
	require.NoError(t, e.Send(ctx, event(pod, "b", base.Add(time.Second))))
	withBody := event(pod, "c", base.Add(2*time.Second))
	withBody.Object.Body = []byte(`{"kind":"Pod"}`)
	require.NoError(t, e.Send(ctx, withBody))
	require.NoError(t, e.Send(ctx, withBody))
	require.NoError(t, e.Stop(ctx))
	assert.Len(t, linker.Calls(), 2, "first sight, then first body")
}

type blockingLinker struct {
	mu      sync.Mutex
	running map[aggregator.ObjectKey]int
	maxSeen int
	calls   int
	release chan struct{}
}

func (l *blockingLinker) Name() string { return "blocking" }
func (l *blockingLinker) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	l.mu.Lock()
	l.calls++
	l.running[obj.Key()]++
	if l.running[obj.Key()] > l.maxSeen {
		l.maxSeen = l.running[obj.Key()]
	}
	l.mu.Unlock()
	select {
	case <-l.release:
	case <-ctx.Done():
	}
	l.mu.Lock()
	l.running[obj.Key()]--
	l.mu.Unlock()
	return nil, nil
}

func TestOneLinkJobPerObjectAtATimeAndBoundedQueue(t *testing.T) {
	l := &blockingLinker{running: map[aggregator.ObjectKey]int{}, release: make(chan struct{})}
	e := newEngine(t, aggregator.Config{LinkWorkers: 2, LinkQueueSize: 1}, aggregator.Deps{Linkers: []aggregator.Linker{l}})
	ctx := context.Background()
	require.NoError(t, e.Send(ctx, event(pod, "a", base)))
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.calls == 1 })
	// Same object, body arrives: a second job, which must wait for the first.
	ev := event(pod, "b", base)
	ev.Object.Body = []byte(`{}`)
	require.NoError(t, e.Send(ctx, ev))
	// Fill the queue and overflow it with other objects.
	for i := range 5 {
		o := pod
		o.Name = fmt.Sprintf("other-%d", i)
		require.NoError(t, e.Send(ctx, event(o, "x", base)))
	}
	close(l.release)
	require.NoError(t, e.Stop(ctx))
	assert.Equal(t, 1, l.maxSeen, "never two jobs for one object at once")
	assert.Less(t, l.calls, 7, "the bounded queue dropped jobs")
	assert.GreaterOrEqual(t, l.calls, 2)
}

// LinkJobs counts the jobs queued and the one running, not the dropped ones, and is 0 once they
// are done: /healthz's "caught up" signal.
func TestLinkJobsCountsQueuedAndRunning(t *testing.T) {
	l := &blockingLinker{running: map[aggregator.ObjectKey]int{}, release: make(chan struct{})}
	e := newEngine(t, aggregator.Config{LinkWorkers: 1, LinkQueueSize: 2}, aggregator.Deps{Linkers: []aggregator.Linker{l}})
	ctx := context.Background()
	assert.Equal(t, 0, e.LinkJobs())
	require.NoError(t, e.Send(ctx, event(pod, "a", base)))
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.calls == 1 })
	assert.Equal(t, 1, e.LinkJobs(), "the running job")
	for i := range 4 {
		o := pod
		o.Name = fmt.Sprintf("other-%d", i)
		require.NoError(t, e.Send(ctx, event(o, "x", base)))
	}
	assert.Equal(t, 3, e.LinkJobs(), "the running job and a full queue of 2; the other 2 were dropped")
	close(l.release)
	waitFor(t, func() bool { return e.LinkJobs() == 0 })
	l.mu.Lock()
	assert.Equal(t, 3, l.calls)
	l.mu.Unlock()
	require.NoError(t, e.Stop(ctx))
	assert.Equal(t, 0, e.LinkJobs())
}

func TestStopWithoutStartAndSendAfterStop(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{ownerChain()}})
	require.NoError(t, err)
	require.NoError(t, e.Stop(context.Background()))
	require.NoError(t, e.Stop(context.Background()))
	require.NoError(t, e.Send(context.Background(), event(pod, "a", base)), "spans still flow; only linking stopped")
	assert.Len(t, sink.Spans(), 2)
}

func TestConfigValidate(t *testing.T) {
	assert.NoError(t, aggregator.Config{}.Validate())
	assert.Error(t, aggregator.Window(time.Millisecond).Validate())
	assert.Error(t, aggregator.Window(-time.Minute).Validate())
	assert.NoError(t, aggregator.Window(0).Validate(), "zero means the default")
	assert.Equal(t, aggregator.DefaultWindow, aggregator.Window(0).Length())
	assert.Error(t, aggregator.Config{LinkWorkers: -1}.Validate())
	_, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Window: aggregator.Window(time.Millisecond)})
	assert.Error(t, err)
}

type myLinker struct{}

func (myLinker) Name() string { return "mine" }
func (myLinker) Lookup(context.Context, aggregator.Object) ([]aggregator.Link, error) {
	return []aggregator.Link{{Target: deploy, Role: aggregator.RoleParent}}, nil
}

func TestModuleCollectsLinkersAndSinks(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	var agg aggregator.Aggregator
	app := fxtest.New(t,
		aggregator.Module,
		fx.Provide(aggregator.AsLinker(func() myLinker { return myLinker{} })),
		fx.Provide(aggregator.AsSink(func() *aggregatortest.RecordingSink { return sink })),
		fx.Populate(&agg),
	)
	app.RequireStart()
	require.NoError(t, agg.Send(context.Background(), event(pod, "a", base)))
	app.RequireStop()
	assert.Len(t, linkSpans(sink.Spans()), 2)
}

func TestLinkersRunAgainWhenMetadataChanges(t *testing.T) {
	linker := ownerChain()
	e := newEngine(t, aggregator.Config{LinkDepth: 1}, aggregator.Deps{Linkers: []aggregator.Linker{linker}})
	ctx := context.Background()
	send := func(id string, hash uint64) {
		ev := event(pod, id, base)
		ev.Object.Body, ev.Object.MetaHash = []byte(`{}`), hash
		require.NoError(t, e.Send(ctx, ev))
	}
	send("a", 1)
	send("b", 1) // same metadata: nothing to do
	send("c", 2) // an owner or annotation changed
	send("d", 0) // unknown: treated as unchanged
	require.NoError(t, e.Stop(ctx))
	assert.Len(t, linker.Calls(), 2)
}

func TestEventLinksAreWrittenBothWays(t *testing.T) {
	sink := &aggregatortest.RecordingSink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}})
	ev := event(pod, "scheduled", base)
	node := aggregator.ObjectRef{Cluster: "c1", Version: "v1", Resource: "nodes", Name: "n1"}
	ev.Links = []aggregator.Link{{Target: node, Role: aggregator.RoleParent, Class: "event.related"}}
	require.NoError(t, e.Send(context.Background(), ev))
	links := linkSpans(sink.Spans()) // written by Send itself, no worker involved
	require.Len(t, links, 2)
	assert.Equal(t, "event.related", links["web-1-a->n1:parent"].Link.Class)
	assert.NotNil(t, links["n1->web-1-a:child"])
	assert.Len(t, byKind(sink.Spans(), aggregator.KindObject), 2, "the related Node gets its object span")

	bad := event(pod, "self", base)
	bad.Links = []aggregator.Link{{Target: pod, Role: aggregator.RoleParent}}
	assert.Error(t, e.Send(context.Background(), bad), "a link to itself is reported")
}

// When Stop's ctx ends before the link queue drained, the running lookups are cancelled, the rest
// of the queue is dropped, and the workers are gone when Stop returns.
func TestStopDeadlineCancelsLookups(t *testing.T) {
	entered := make(chan struct{}, 1)
	var cancelled sync.WaitGroup
	cancelled.Add(1)
	var lookups sync.Map
	blocking := aggregator.NewLinker("blocking", func(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		if _, again := lookups.LoadOrStore(obj.Key(), true); again {
			return nil, nil
		}
		if obj.Key() == pod.Key() {
			entered <- struct{}{}
			<-ctx.Done()
			cancelled.Done()
			return nil, ctx.Err()
		}
		return nil, nil
	})
	e, err := aggregator.New(aggregator.Config{LinkWorkers: 1}, aggregator.Deps{Linkers: []aggregator.Linker{blocking}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	require.NoError(t, e.Send(ctx, event(pod, "a", base)))
	<-entered
	require.NoError(t, e.Send(ctx, event(rs, "b", base))) // queued behind the blocked lookup

	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.Stop(sctx), context.DeadlineExceeded)
	cancelled.Wait() // the lookup saw its context end
	_, ranRS := lookups.Load(rs.Key())
	assert.False(t, ranRS, "the rest of the queue is dropped")
	require.NoError(t, e.Stop(ctx), "stop twice")
}

// orderLinker records the MetaHash of every lookup, slowly, and links every object to deploy.
type orderLinker struct {
	mu     sync.Mutex
	hashes []uint64
}

func (l *orderLinker) Name() string { return "order" }
func (l *orderLinker) Lookup(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	time.Sleep(time.Millisecond) // a slow lookup (not a wait): the object's later jobs arrive while it runs
	l.mu.Lock()
	l.hashes = append(l.hashes, obj.MetaHash)
	l.mu.Unlock()
	return []aggregator.Link{{Target: deploy, Role: aggregator.RoleParent}}, nil
}

// TestLinkJobsOfAnObjectRunInOrder (issue 18): every body change of an object is looked up, in
// the order of its events, whatever the number of workers, so the links stored (and the time of
// the last one) do not depend on timing. Before, a job arriving while the object's previous one
// ran replaced any waiting one, and two workers could take an object's jobs in either order.
func TestLinkJobsOfAnObjectRunInOrder(t *testing.T) {
	for _, workers := range []int{1, 8} {
		l := &orderLinker{}
		sink := &aggregatortest.RecordingSink{}
		e := newEngine(t, aggregator.Config{LinkWorkers: workers, LinkDepth: 1}, aggregator.Deps{
			Linkers: []aggregator.Linker{l}, Sinks: []aggregator.Sink{sink}})
		ctx := context.Background()
		var want []uint64
		for i := range 30 {
			ev := event(pod, fmt.Sprint(i), base.Add(time.Duration(i)*time.Second))
			ev.Object.Body, ev.Object.MetaHash = []byte(`{}`), uint64(i+1)
			require.NoError(t, e.Send(ctx, ev))
			want = append(want, uint64(i+1))
		}
		require.NoError(t, e.Stop(ctx))
		assert.Equal(t, want, l.hashes, "%d workers", workers)
		for _, sp := range byKind(sink.Spans(), aggregator.KindLink) {
			assert.Equal(t, base.Add(29*time.Second), sp.Start, "%d workers: the last job wrote the link", workers)
		}
	}
}
