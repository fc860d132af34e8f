package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue/internal/natslog"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/natsqueue"
)

// natsTestConfig is a small, fast configuration for tests.
func natsTestConfig(url string) natsqueue.Config {
	return natsqueue.Config{
		URLs:            []string{url},
		Partitions:      4,
		AckWait:         2 * time.Second,
		PinnedTTL:       2 * time.Second,
		RetryBackoff:    20 * time.Millisecond,
		MaxRetryBackoff: 100 * time.Millisecond,
		MaxInFlight:     8,
		PublishTimeout:  2 * time.Second,
		ConnectTimeout:  time.Second,
		ReconnectWait:   20 * time.Millisecond,
	}
}

// natsHandled records the events a handler saw, by audit ID, in order.
type natsHandled struct {
	mu    sync.Mutex
	count map[string]int
	order []string
	gate  chan struct{} // if set, the handler waits for it to close (or ctx)
}

func newNATSHandled() *natsHandled { return &natsHandled{count: map[string]int{}} }

func (l *natsHandled) handle(ctx context.Context, _ string, ev *auditv1.Event) {
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count[ev.AuditID]++
	l.order = append(l.order, ev.AuditID)
}

func (l *natsHandled) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.count))
	for k, v := range l.count {
		out[k] = v
	}
	return out
}

// requireExactlyOnce waits until every id was handled, then a little longer for doubles, and
// asserts each was handled exactly once and nothing else was.
func (l *natsHandled) requireExactlyOnce(t *testing.T, ids []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, missing := l.snapshot(), 0
		for _, id := range ids {
			if got[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted events never handled; handled: %v", missing, len(ids), got)
		}
		time.Sleep(10 * time.Millisecond) // the interval of this poll loop (deadline above)
	}
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	// A double (a redelivery) would come late: none may come for a while.
	assert.Never(t, func() bool { return !maps.Equal(want, l.snapshot()) }, 200*time.Millisecond, 10*time.Millisecond,
		"an event handled twice, or one not accepted handled")
	assert.Equal(t, want, l.snapshot(), "each accepted event handled once, nothing else")
}

// natsBatch is an EventList of n events named prefix-0..n-1, on n/2 objects: each object's
// events are consecutive updates.
func natsBatch(prefix string, n int) (string, []string) {
	var items, ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		ids = append(ids, id)
		items = append(items, fmt.Sprintf(`{"level":"RequestResponse","auditID":%q,"stage":"ResponseComplete","verb":"update",`+
			`"user":{"username":"admin"},"objectRef":{"resource":"configmaps","namespace":"default","name":"%s-obj%d","apiVersion":"v1"},`+
			`"responseStatus":{"code":200},"responseObject":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"%s-obj%d","namespace":"default","resourceVersion":"%d"},"data":{"k":"%s"}},`+
			`"requestReceivedTimestamp":"2026-11-29T17:09:30.000000Z","stageTimestamp":"2026-11-29T17:09:30.123456Z"}`,
			id, prefix, i/2, prefix, i/2, 100+i, strings.Repeat("x", 64)))
	}
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`, ids
}

// poster enqueues one EventList body as the webhook would, for cluster c1.
type poster func(body string) error

// enqueuer decodes a body and enqueues its events into q.
func enqueuer(t *testing.T, q Queue) poster {
	return func(body string) error {
		events, err := auditv1.DecodeEventList([]byte(body))
		require.NoError(t, err)
		return q.Enqueue(testCtx(t), "c1", events)
	}
}

// natsPipeline is NATS queue -> natsHandled, fed by enqueuer.
func natsPipeline(t *testing.T, cfg natsqueue.Config, log *natsHandled) (*natsQueue, poster) {
	t.Helper()
	q, err := newNATS(cfg, Deps{Handle: log.handle})
	require.NoError(t, err)
	ctx := testCtx(t)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	return q, enqueuer(t, q)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestNATSQueueWebhookUnavailableWhileNATSDown: the webhook answers 200 once JetStream has the
// batch; with the server down it answers 503 with Retry-After and the reason, and once the server
// is back the retried batch is handled, with nothing lost and nothing doubled.
func TestNATSQueueWebhookUnavailableWhileNATSDown(t *testing.T) {
	js := natstest.StartJetStream(t)
	log := newNATSHandled()
	cfg := natsTestConfig(js.URL())
	// This test is about the server being away, not about redelivery after AckWait. Under -race,
	// with other packages' tests running at once, it saw one delivery handled twice in each of
	// two full runs; the other tests' AckWait of 2 s expiring before the acks is the likely cause.
	cfg.AckWait, cfg.PinnedTTL = 10*time.Second, 10*time.Second
	q, h := natsPipeline(t, cfg, log)

	b1, ids1 := natsBatch("before", 6)
	require.NoError(t, h(b1))
	log.requireExactlyOnce(t, ids1)
	require.NoError(t, q.Health(context.Background()))

	js.Stop()
	b2, ids2 := natsBatch("during", 6)
	err := h(b2)
	require.ErrorIs(t, err, ErrUnavailable, "the webhook answers 503 with Retry-After")
	require.Eventually(t, func() bool { return errors.Is(q.Health(context.Background()), ErrUnavailable) },
		10*time.Second, 10*time.Millisecond, "Health reports NATS down")

	js.Start()
	// The sender retries until the batch is taken (the webhook's 200).
	require.Eventually(t, func() bool { return h(b2) == nil }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, q.Flush(testCtx(t)))
	log.requireExactlyOnce(t, append(ids1, ids2...))
	assert.Zero(t, q.Len())
}

// TestNATSQueueStreamFull: with the stream at its byte limit (discard new) the webhook answers
// 429 with Retry-After; a client that retries what was refused completes once the consumer
// catches up, with nothing lost and nothing doubled.
func TestNATSQueueStreamFull(t *testing.T) {
	js := natstest.StartJetStream(t)
	log := newNATSHandled()
	log.gate = make(chan struct{})
	cfg := natsTestConfig(js.URL())
	cfg.MaxBytes = 16 << 10
	_, h := natsPipeline(t, cfg, log)

	var bodies []string
	var all []string
	for i := range 40 {
		b, ids := natsBatch(fmt.Sprintf("b%d", i), 4)
		bodies = append(bodies, b)
		all = append(all, ids...)
	}
	// The consumer is stuck: the stream fills up.
	full := -1
	for i, b := range bodies {
		err := h(b)
		if errors.Is(err, ErrFull) { // the webhook's 429
			full = i
			break
		}
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, full, 1, "the stream filled up after some batches")

	close(log.gate)
	// The retrying client: each refused batch again after a pause, in order.
	ctx := testCtx(t)
	for _, b := range bodies[full:] {
		for {
			err := h(b)
			if err == nil {
				break
			}
			require.True(t, errors.Is(err, ErrFull) || errors.Is(err, ErrUnavailable), "refused with a reason to retry: %v", err)
			select {
			case <-ctx.Done():
				t.Fatal("the retrying client did not complete")
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	log.requireExactlyOnce(t, all)
}

// TestNATSQueueRestartResumes: a new process on the same stream handles what the previous one
// left (published but not acknowledged) and nothing it had acknowledged. (Messages the stopped
// process had pulled come back after natsqueue's AckWait, possibly behind newer ones of their
// partition: see natsqueue.Config.MaxInFlight.)
func TestNATSQueueRestartResumes(t *testing.T) {
	js := natstest.StartJetStream(t)
	cfg := natsTestConfig(js.URL())
	log1 := newNATSHandled()
	q1, err := newNATS(cfg, Deps{Handle: log1.handle})
	require.NoError(t, err)
	ctx := testCtx(t)
	require.NoError(t, q1.Start(ctx))
	mux1 := enqueuer(t, q1)

	b1, ids1 := natsBatch("first", 8)
	require.NoError(t, mux1(b1))
	require.NoError(t, q1.Flush(ctx))
	log1.requireExactlyOnce(t, ids1)

	// The next batch is accepted but the process stops before handling it.
	log1.mu.Lock()
	log1.gate = make(chan struct{})
	log1.mu.Unlock()
	b2, ids2 := natsBatch("second", 8)
	require.NoError(t, mux1(b2))
	require.NoError(t, q1.Stop(ctx))
	assert.Equal(t, len(ids1), len(log1.snapshot()), "the stopped process handled nothing more")

	log2 := newNATSHandled()
	q2, h2 := natsPipeline(t, cfg, log2)
	b3, ids3 := natsBatch("third", 8)
	require.NoError(t, h2(b3))
	require.NoError(t, q2.Flush(ctx))
	log2.requireExactlyOnce(t, append(ids2, ids3...))
	assert.Equal(t, len(ids1), len(log1.snapshot()), "the first process handled nothing after its stop")
}

func TestQueueConfigNATSExclusive(t *testing.T) {
	yes := true
	cfg := Config{NATS: natsqueue.Config{URLs: []string{"nats://127.0.0.1:4222"}}}
	require.NoError(t, cfg.Validate())
	assert.True(t, cfg.IsNATS())
	withDir := cfg
	withDir.Dir = t.TempDir()
	assert.ErrorContains(t, withDir.Validate(), "nats.urls and dir")
	assert.False(t, withDir.IsDurable(), "NATS wins over the durable queue")
	withDurable := cfg
	withDurable.Durable = &yes
	assert.ErrorContains(t, withDurable.Validate(), "exclusive")
	bad := cfg
	bad.NATS.Replicas = 2
	assert.ErrorContains(t, bad.Validate(), "replicas 2")
}

// TestNATSQueuePoisonMessage: a message that does not decode is retried, moved to the
// dead-letter stream and counted, and its partition goes on with the next messages.
func TestNATSQueuePoisonMessage(t *testing.T) {
	js := natstest.StartJetStream(t)
	log := newNATSHandled()
	cfg := natsTestConfig(js.URL())
	cfg.Partitions = 1
	cfg.MaxDeliveries = 2
	q, h := natsPipeline(t, cfg, log)

	nc, err := nats.Connect(js.URL())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Publish(natslog.Subject(cfg.WithDefaults(), "c1", 0), []byte("not an audit record")))
	require.NoError(t, nc.Flush())

	b, ids := natsBatch("after", 4)
	require.NoError(t, h(b))
	require.NoError(t, q.Flush(testCtx(t)))
	log.requireExactlyOnce(t, ids)

	jsc, err := jetstream.New(nc)
	require.NoError(t, err)
	dead, err := jsc.Stream(testCtx(t), cfg.WithDefaults().Stream+"_DEAD")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), dead.CachedInfo().State.Msgs, "the poison message is in the dead-letter stream")
}

// TestNATSQueueBatchesSyncs: messages a partition has pulled are handled as a batch, in order,
// with one sink sync for the batch before it is acknowledged, instead of a sync and an
// acknowledgement round trip per message. Every event is handled once.
func TestNATSQueueBatchesSyncs(t *testing.T) {
	js := natstest.StartJetStream(t)
	log := newNATSHandled()
	log.gate = make(chan struct{})
	cfg := natsTestConfig(js.URL())
	cfg.Partitions = 1
	cfg.MaxInFlight = 256
	var mu sync.Mutex
	syncs, handledAtSync := 0, 0
	q, err := newNATS(cfg, Deps{Handle: log.handle, Sync: func(context.Context) error {
		log.mu.Lock()
		n := len(log.order)
		log.mu.Unlock()
		mu.Lock()
		syncs++
		handledAtSync = n
		mu.Unlock()
		return nil
	}})
	require.NoError(t, err)
	ctx := testCtx(t)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	mux := enqueuer(t, q)

	// The handler waits while the batch is published: the partition's messages pile up.
	b, ids := natsBatch("batch", 200)
	require.NoError(t, mux(b))
	close(log.gate)
	require.NoError(t, q.Flush(ctx))
	log.requireExactlyOnce(t, ids)
	log.mu.Lock()
	assert.Equal(t, ids, log.order, "handled in order")
	log.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	assert.LessOrEqual(t, syncs, 10, "one sync per batch, not per message")
	assert.Equal(t, len(ids), handledAtSync, "the last sync came after the last event was handled")
}
