package remotelinker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func TestRoundTrip(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	var gotBody string
	var mu sync.Mutex
	l := &funcLinker{name: "volumes", fn: func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		mu.Lock()
		gotBody = string(obj.Body)
		mu.Unlock()
		return []aggregator.Link{{Target: cm, Role: aggregator.RoleChild, Class: "volumes"}}, nil
	}}
	startWorker(t, connect(t, url), l, WorkerConfig{}, tel)

	c, err := NewClient(connect(t, url), LinkerConfig{Name: "volumes"}, tel)
	require.NoError(t, err)
	links, err := c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod, Body: json.RawMessage(`{"kind":"Pod"}`)})
	require.NoError(t, err)
	assert.Equal(t, []aggregator.Link{{Target: cm, Role: aggregator.RoleChild, Class: "volumes"}}, links)
	mu.Lock()
	assert.JSONEq(t, `{"kind":"Pod"}`, gotBody, "the body travels with the job")
	mu.Unlock()

	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultOK))
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.links", "", ""))
	assert.Positive(t, telemetrytest.Int64(t, reader, "kelemetry.remotelinker.bytes", "direction", "sent"))
	assert.Positive(t, telemetrytest.Int64(t, reader, "kelemetry.remotelinker.bytes", "direction", "received"))
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.worker.jobs", "result", resultOK))
	assert.Equal(t, "volumes", c.Name())
	assert.Equal(t, defaultMaxInFlight, c.LinkWorkers())
}

func TestWorkersShareJobsInAQueueGroup(t *testing.T) {
	url := natsServer(t)
	var ls []*funcLinker
	for range 2 {
		l := &funcLinker{name: "x", fn: func(context.Context, aggregator.Object) ([]aggregator.Link, error) { return nil, nil }}
		ls = append(ls, l)
		startWorker(t, connect(t, url), l, WorkerConfig{}, telemetry.Settings{})
	}
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "x"}, telemetry.Settings{})
	require.NoError(t, err)
	for range 40 {
		_, err := c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(40), ls[0].calls.Load()+ls[1].calls.Load(), "each job went to one worker")
	assert.Positive(t, ls[0].calls.Load())
	assert.Positive(t, ls[1].calls.Load())
}

func TestNoWorkerFailsFastAndIsCounted(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "gone", Timeout: 5 * time.Second}, tel)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
	require.ErrorIs(t, err, errNoWorker)
	assert.Less(t, time.Since(start), time.Second, "no waiting for the timeout")
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultNoResponders))
}

func TestSlowWorkerTimesOutAndIsCounted(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	startWorker(t, connect(t, url), &funcLinker{name: "slow", fn: stuck}, WorkerConfig{Timeout: 10 * time.Second}, telemetry.Settings{})
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "slow", Timeout: 200 * time.Millisecond}, tel)
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
	require.ErrorIs(t, err, errTimeout)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultTimeout))
}

// TestSlowWorkerDelaysOnlyItsLinks runs the client in a real aggregator next to a fast local
// linker: with a worker that never answers, the fast linker's links and Send are not held up.
func TestSlowWorkerDelaysOnlyItsLinks(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	startWorker(t, connect(t, url), &funcLinker{name: "a-slow", fn: stuck}, WorkerConfig{Timeout: 10 * time.Second}, telemetry.Settings{})
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "a-slow", Timeout: 2 * time.Second, MaxInFlight: 2}, tel)
	require.NoError(t, err)
	fast := &funcLinker{name: "fast", fn: func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		target := cm
		target.Name = obj.Name + "-cm"
		return []aggregator.Link{{Target: target, Role: aggregator.RoleChild}}, nil
	}}
	var mu sync.Mutex
	var linkSpans int
	sink := aggregator.SinkFunc(func(_ context.Context, spans []*aggregator.Span) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range spans {
			if s.Kind == aggregator.KindLink {
				linkSpans++
			}
		}
		return nil
	})
	e, err := aggregator.New(aggregator.Config{LinkWorkers: 1, LinkTimeout: 5 * time.Second, LinkDepth: 1},
		aggregator.Deps{Linkers: []aggregator.Linker{c, fast}, Sinks: []aggregator.Sink{sink}})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))

	const objects = 20
	start := time.Now()
	for i := range objects {
		obj := pod
		obj.Name = "web-" + string(rune('a'+i))
		require.NoError(t, e.Send(context.Background(), &aggregator.Event{Object: aggregator.Object{ObjectRef: obj},
			Source: "audit", ID: obj.Name, Title: "create", Start: time.Now()}))
	}
	assert.Less(t, time.Since(start), time.Second, "Send does not wait for linkers")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return linkSpans == 2*objects }, 3*time.Second, 5*time.Millisecond,
		"the fast linker's links of every object come before the slow linker's first timeout")

	stopCtx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = e.Stop(stopCtx)
	assert.Positive(t, telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultTimeout)+
		telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultError))
}

func TestBoundedInFlight(t *testing.T) {
	url := natsServer(t)
	tel, reader := metrics()
	startWorker(t, connect(t, url), &funcLinker{name: "slow", fn: stuck}, WorkerConfig{Timeout: 10 * time.Second}, telemetry.Settings{})
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "slow", Timeout: 3 * time.Second, MaxInFlight: 2}, tel)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = c.Lookup(ctx, aggregator.Object{ObjectRef: pod}) })
	}
	require.Eventually(t, func() bool { return len(c.sem) == 2 }, 2*time.Second, time.Millisecond)
	start := time.Now()
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
	require.ErrorIs(t, err, errBusy)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "over the bound: skipped at once")
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", resultSkipped))
	cancel()
	wg.Wait()
}

func TestBadReplies(t *testing.T) {
	url := natsServer(t)
	nc := connect(t, url)
	replies := map[string]struct {
		reply  string
		err    error
		result string
	}{
		"garbage":     {`not json`, errBadReply, resultBadReply},
		"version":     {`{"v":2,"links":[]}`, errBadReply, resultBadReply},
		"no-version":  {`{}`, errBadReply, resultBadReply},
		"error":       {`{"v":1,"error":"boom","code":"lookup"}`, errRemote, resultRemoteError},
		"many-links":  {`{"v":1,"links":[{"target":{"resource":"a","name":"b"},"role":"child"},{"target":{"resource":"a","name":"c"},"role":"child"}]}`, errBadReply, resultBadReply},
		"wrong-types": {`{"v":1,"links":"x"}`, errBadReply, resultBadReply},
	}
	for name, tc := range replies {
		t.Run(name, func(t *testing.T) {
			sub, err := nc.Subscribe("kelemetry.link."+name, func(m *nats.Msg) { _ = m.Respond([]byte(tc.reply)) })
			require.NoError(t, err)
			defer func() { _ = sub.Unsubscribe() }()
			tel, reader := metrics()
			c, err := NewClient(nc, LinkerConfig{Name: name, MaxLinks: 1}, tel)
			require.NoError(t, err)
			links, err := c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
			require.ErrorIs(t, err, tc.err)
			assert.Nil(t, links)
			assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.jobs", "result", tc.result))
		})
	}
}

func TestClientConfigValidation(t *testing.T) {
	for _, cfg := range []LinkerConfig{{}, {Name: "a.b"}, {Name: "x", Subject: "a..b"}, {Name: "x", Subject: "a.*"}} {
		_, err := newClient(func() *nats.Conn { return nil }, cfg, telemetry.Settings{})
		assert.Error(t, err, "%+v", cfg)
	}
	c, err := newClient(func() *nats.Conn { return nil }, LinkerConfig{Name: "x"}, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, "kelemetry.link.x", c.Config().Subject)
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod})
	assert.ErrorIs(t, err, errNotConnected)

	both := Config{Linkers: []LinkerConfig{{Name: "x"}, {Name: "x"}}, NATS: natsqueueURL("nats://127.0.0.1:4222")}
	assert.ErrorContains(t, both.Validate(), "configured twice")
	assert.NoError(t, Config{}.Validate(), "no linkers, no NATS needed")
	assert.Error(t, Config{Linkers: []LinkerConfig{{Name: "x"}}}.Validate(), "linkers need NATS URLs")
	assert.Error(t, Config{Linkers: []LinkerConfig{{Name: "x", Timeout: 10 * time.Second}}}.ValidateTimeouts(10*time.Second))
	assert.NoError(t, Config{Linkers: []LinkerConfig{{Name: "x"}}}.ValidateTimeouts(10*time.Second))
}

func TestBodyOverMaxPayloadIsLeftOut(t *testing.T) {
	url := natsServerWith(t, func(o *server.Options) { o.MaxPayload = 2048 })
	tel, reader := metrics()
	var mu sync.Mutex
	var bodies []int
	startWorker(t, connect(t, url), &funcLinker{name: "big", fn: func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		mu.Lock()
		bodies = append(bodies, len(obj.Body))
		mu.Unlock()
		return nil, nil
	}}, WorkerConfig{}, telemetry.Settings{})
	c, err := NewClient(connect(t, url), LinkerConfig{Name: "big"}, tel)
	require.NoError(t, err)
	big := json.RawMessage(`{"data":"` + strings.Repeat("x", 4096) + `"}`)
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod, Body: big})
	require.NoError(t, err)
	_, err = c.Lookup(context.Background(), aggregator.Object{ObjectRef: pod, Body: json.RawMessage(`{"small":1}`)})
	require.NoError(t, err)
	mu.Lock()
	assert.Equal(t, []int{0, len(`{"small":1}`)}, bodies, "the large body is left out, the small one sent")
	mu.Unlock()
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.remotelinker.bodies.dropped", "", ""))
}

// A client's and a worker's counters are exported at 0 from the start, under their linker's
// name, each result and direction included.
func TestCountersStartAtZero(t *testing.T) {
	tel, reader := metrics()
	_, err := newClient(func() *nats.Conn { return nil }, LinkerConfig{Name: "volumes"}, tel)
	require.NoError(t, err)
	jobs := map[string]int64{}
	for _, r := range []string{"ok", "timeout", "no_responders", "skipped", "bad_reply", "remote_error", "error"} {
		jobs["linker=volumes,result="+r] = 0
	}
	assert.Equal(t, jobs, telemetrytest.Points(t, reader, "kelemetry.remotelinker.jobs"))
	assert.Equal(t, map[string]int64{"direction=sent,linker=volumes": 0, "direction=received,linker=volumes": 0},
		telemetrytest.Points(t, reader, "kelemetry.remotelinker.bytes"))
	assert.Equal(t, telemetrytest.Zeros("linker", "volumes"), telemetrytest.Points(t, reader, "kelemetry.remotelinker.links"))
	assert.Equal(t, telemetrytest.Zeros("linker", "volumes"), telemetrytest.Points(t, reader, "kelemetry.remotelinker.bodies.dropped"))

	w, err := newWorker(connect(t, natsServer(t)), &funcLinker{name: "owners"}, WorkerConfig{}, tel)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	jobs = map[string]int64{}
	for _, r := range []string{"ok", "bad_request", "unsupported_version", "busy", "lookup", "timeout", "panic", "stopping"} {
		jobs["linker=owners,result="+r] = 0
	}
	assert.Equal(t, jobs, telemetrytest.Points(t, reader, "kelemetry.remotelinker.worker.jobs"))
	assert.Equal(t, telemetrytest.Zeros("linker", "owners"), telemetrytest.Points(t, reader, "kelemetry.remotelinker.worker.links"))
}
