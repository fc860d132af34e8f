package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// queueEvent is an event on pod <name> in namespace ns with audit ID id.
func queueEvent(ns, name, id string) *auditv1.Event {
	return &auditv1.Event{
		AuditID:   id,
		Stage:     "ResponseComplete",
		Verb:      "update",
		ObjectRef: &auditv1.ObjectReference{Resource: "pods", Namespace: ns, Name: name, APIVersion: "v1"},
	}
}

// handledLog records the events a queue handler saw.
type handledLog struct {
	mu     sync.Mutex
	byName map[string][]string // object name -> audit IDs in handling order
	n      int
}

func (h *handledLog) handle(_ context.Context, _ string, ev *auditv1.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byName == nil {
		h.byName = map[string][]string{}
	}
	key := ev.AuditID
	if ev.ObjectRef != nil {
		key = ev.ObjectRef.Name
	}
	h.byName[key] = append(h.byName[key], ev.AuditID)
	h.n++
}

func (h *handledLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func newTestQueue(t *testing.T, cfg Config, h Handler) (*memQueue, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	q, err := newMemory(cfg, Deps{Handle: h, Telemetry: telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
	return q, reader
}

func TestQueueConfig(t *testing.T) {
	cfg := Config{}.WithDefaults()
	assert.Equal(t, defaultCapacity, cfg.Capacity)
	assert.Positive(t, cfg.Partitions)
	require.NoError(t, Config{}.Validate())
	require.Error(t, Config{Capacity: -1}.Validate())
	require.Error(t, Config{Partitions: -1}.Validate())
	require.Error(t, Config{MaxBytes: -1}.Validate())
	assert.Equal(t, int64(defaultMaxBytes), cfg.MaxBytes)
	_, err := newMemory(Config{}, Deps{Handle: nil})
	require.Error(t, err)
}

func TestQueueKeepsOrderPerObject(t *testing.T) {
	var h handledLog
	q, reader := newTestQueue(t, Config{Capacity: 10_000, Partitions: 4}, h.handle)
	ctx := context.Background()

	// Interleave the events of 20 objects over batches, some before Start, some after.
	const objects, perObject = 20, 50
	var batch []*auditv1.Event
	for i := range perObject {
		for o := range objects {
			batch = append(batch, queueEvent("default", "pod-"+strconv.Itoa(o), fmt.Sprintf("pod-%d/%03d", o, i)))
			if len(batch) == 37 {
				require.NoError(t, q.Enqueue(ctx, "c1", batch))
				batch = nil
			}
		}
		if i == perObject/2 {
			require.NoError(t, q.Start(ctx))
		}
	}
	require.NoError(t, q.EnqueueWait(ctx, "c1", batch))
	require.NoError(t, q.Flush(ctx))

	assert.Equal(t, objects*perObject, h.count())
	assert.Equal(t, 0, q.Len())
	for o := range objects {
		ids := h.byName["pod-"+strconv.Itoa(o)]
		require.Len(t, ids, perObject)
		for i, id := range ids {
			assert.Equal(t, fmt.Sprintf("pod-%d/%03d", o, i), id)
		}
	}
	sums := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(objects*perObject), sums["kelemetry.audit.queue.accepted"])
	assert.Equal(t, int64(0), sums["kelemetry.audit.queue.depth"])
	require.NoError(t, q.Stop(ctx))
}

func TestQueuePartitionKey(t *testing.T) {
	const n = 1 << 20 // many partitions: distinct keys almost surely land apart
	pod := queueEvent("ns", "web-0", "a1")
	binding := queueEvent("ns", "web-0", "a2")
	binding.ObjectRef.Subresource = "binding"
	binding.ObjectRef.APIVersion = "v2"
	binding.ObjectRef.ResourceVersion = "42"
	assert.Equal(t, auditv1.PartitionIndex("c1", pod, n), auditv1.PartitionIndex("c1", binding, n),
		"subresource and API version must not change the partition")
	assert.NotEqual(t, auditv1.PartitionIndex("c1", pod, n), auditv1.PartitionIndex("c2", pod, n), "cluster is part of the key")
	other := queueEvent("ns", "web-1", "a1")
	assert.NotEqual(t, auditv1.PartitionIndex("c1", pod, n), auditv1.PartitionIndex("c1", other, n))
	// Field boundaries count: ("ab","c") is not ("a","bc").
	a := queueEvent("ab", "c", "x")
	b := queueEvent("a", "bc", "x")
	assert.NotEqual(t, auditv1.PartitionIndex("c1", a, n), auditv1.PartitionIndex("c1", b, n))

	// A create with generateName names its object only in the response: it goes where the
	// object's later events go (issue 18: otherwise a Pod's binding and status patch could be
	// handled before its create, and its diffs and link times depend on timing).
	create := queueEvent("ns", "", "a3")
	create.Verb = "create"
	create.ResponseObject = []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"ns","uid":"u1"}}`)
	assert.Equal(t, auditv1.PartitionIndex("c1", pod, n), auditv1.PartitionIndex("c1", create, n),
		"a generateName create goes to its object's partition")
	failed := queueEvent("ns", "", "a4")
	failed.Verb = "create"
	failed.ResponseObject = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`)
	assert.Equal(t, auditv1.PartitionIndex("c1", queueEvent("ns", "", "a5"), n), auditv1.PartitionIndex("c1", failed, n),
		"a create that made nothing stays with its collection")
	// A namespace's own requests carry its name as namespace too; its create does not.
	nsCreate := &auditv1.Event{AuditID: "n1", Verb: "create", ObjectRef: &auditv1.ObjectReference{Resource: "namespaces"},
		ResponseObject: []byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"team"}}`)}
	nsUpdate := &auditv1.Event{AuditID: "n2", Verb: "update", ObjectRef: &auditv1.ObjectReference{Resource: "namespaces", Namespace: "team", Name: "team"}}
	assert.Equal(t, auditv1.PartitionIndex("c1", nsUpdate, n), auditv1.PartitionIndex("c1", nsCreate, n))

	// Events without objectRef spread by audit ID.
	seen := map[int]bool{}
	for i := range 50 {
		seen[auditv1.PartitionIndex("c1", &auditv1.Event{AuditID: strconv.Itoa(i)}, 8)] = true
	}
	assert.Greater(t, len(seen), 4)
}

func TestQueueRunsObjectsInParallel(t *testing.T) {
	// Find two objects on different partitions of a 2-partition queue.
	first := queueEvent("ns", "a", "a")
	var second *auditv1.Event
	for i := range 100 {
		ev := queueEvent("ns", "b"+strconv.Itoa(i), "b")
		if auditv1.PartitionIndex("c", ev, 2) != auditv1.PartitionIndex("c", first, 2) {
			second = ev
			break
		}
	}
	require.NotNil(t, second)

	secondRan := make(chan struct{})
	firstDone := make(chan struct{})
	q, _ := newTestQueue(t, Config{Capacity: 10, Partitions: 2}, func(ctx context.Context, _ string, ev *auditv1.Event) {
		if ev == first {
			// Blocks until the other partition has run: a sequential queue would deadlock.
			select {
			case <-secondRan:
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
			close(firstDone)
			return
		}
		close(secondRan)
	})
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{first, second}))
	select {
	case <-firstDone:
	case <-time.After(5 * time.Second):
		t.Fatal("first handler never finished")
	}
	select {
	case <-secondRan:
	default:
		t.Fatal("the two partitions did not run in parallel")
	}
}

func TestQueueAllOrNothing(t *testing.T) {
	var h handledLog
	q, reader := newTestQueue(t, Config{Capacity: 10, Partitions: 3}, h.handle)
	ctx := context.Background()
	batch := func(n int) []*auditv1.Event {
		var evs []*auditv1.Event
		for i := range n {
			evs = append(evs, queueEvent("ns", "p"+strconv.Itoa(i), strconv.Itoa(i)))
		}
		return evs
	}

	require.NoError(t, q.Enqueue(ctx, "c", batch(6)))
	err := q.Enqueue(ctx, "c", batch(5))
	require.ErrorIs(t, err, ErrFull)
	assert.NotErrorIs(t, err, ErrBatchTooLarge)
	assert.Equal(t, 6, q.Len(), "a rejected batch queues nothing")
	require.NoError(t, q.Enqueue(ctx, "c", batch(4)))
	assert.Equal(t, 10, q.Len())
	require.ErrorIs(t, q.Enqueue(ctx, "c", batch(1)), ErrFull)

	err = q.Enqueue(ctx, "c", batch(11))
	require.ErrorIs(t, err, ErrFull)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	assert.Contains(t, err.Error(), "never fit")
	err = q.EnqueueWait(ctx, "c", batch(11))
	require.ErrorIs(t, err, ErrBatchTooLarge, "waiting cannot help a batch larger than the queue")

	require.Error(t, q.Enqueue(ctx, "c", []*auditv1.Event{nil}))
	require.NoError(t, q.Enqueue(ctx, "c", nil))

	sums := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(10), sums["kelemetry.audit.queue.accepted"])
	assert.Equal(t, int64(5+1+11+11), sums["kelemetry.audit.queue.rejected{reason=full}"], "refused, not lost")
	assert.Zero(t, sums["kelemetry.audit.queue.dropped{reason=full}"], "a refusal is not a drop")
	assert.Equal(t, int64(10), sums["kelemetry.audit.queue.depth"])

	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Stop(ctx))
	assert.Equal(t, 10, h.count(), "Stop drains the queue")
	assert.Equal(t, 0, q.Len())
}

// EnqueueParts splits a batch larger than the whole queue into parts the queue takes, in order,
// and still refuses a batch that only does not fit now.
func TestEnqueueParts(t *testing.T) {
	var h handledLog
	q, _ := newTestQueue(t, Config{Capacity: 4, Partitions: 1}, h.handle)
	ctx := context.Background()
	var evs []*auditv1.Event
	for i := range 9 {
		evs = append(evs, queueEvent("ns", "p", strconv.Itoa(i)))
	}
	require.NoError(t, q.Start(ctx))
	var refusals int
	for start := 0; start < len(evs); {
		// A part at most the queue's size fits once the worker drained what came before.
		err := EnqueueParts(ctx, q, "c", evs[start:])
		if err == nil {
			break
		}
		require.ErrorIs(t, err, ErrFull)
		require.NotErrorIs(t, err, ErrBatchTooLarge, "a part that fits the queue is only full for now")
		refusals++
		require.NoError(t, q.Flush(ctx))
		start = len(h.byName["p"])
	}
	require.NoError(t, q.Flush(ctx))
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8"}, h.byName["p"], "every event once, in order")
	require.NoError(t, q.Stop(ctx))

	// A single event larger than the queue (by bytes) is refused as such.
	small, _ := newTestQueue(t, Config{Capacity: 4, MaxBytes: 100, Partitions: 1}, h.handle)
	err := EnqueueParts(ctx, small, "c", evs[:2])
	require.ErrorIs(t, err, ErrBatchTooLarge)
}

func TestQueueStopDrainsAndRejects(t *testing.T) {
	var handled atomic.Int32
	q, reader := newTestQueue(t, Config{Capacity: 100, Partitions: 2}, func(context.Context, string, *auditv1.Event) {
		time.Sleep(time.Millisecond) // a slow handler (waits for nothing): Stop must drain behind it
		handled.Add(1)
	})
	ctx := context.Background()
	var evs []*auditv1.Event
	for i := range 40 {
		evs = append(evs, queueEvent("ns", "p"+strconv.Itoa(i%7), strconv.Itoa(i)))
	}
	require.NoError(t, q.Enqueue(ctx, "c", evs))
	require.NoError(t, q.Start(ctx))
	require.Error(t, q.Start(ctx), "second Start")
	require.NoError(t, q.Stop(ctx))
	assert.Equal(t, int32(40), handled.Load())
	assert.Equal(t, 0, q.Len())

	require.ErrorIs(t, q.Enqueue(ctx, "c", evs[:3]), ErrStopped)
	require.ErrorIs(t, q.EnqueueWait(ctx, "c", evs[:2]), ErrStopped)
	require.NoError(t, q.Stop(ctx), "second Stop")
	require.ErrorIs(t, q.Start(ctx), ErrStopped, "Start after Stop")
	require.NoError(t, q.Flush(ctx))

	sums := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(5), sums["kelemetry.audit.queue.rejected{reason=stopped}"], "refused after Stop: the sender keeps them")
	assert.Zero(t, sums["kelemetry.audit.queue.dropped{reason=stopped}"], "everything accepted was handled")
}

func TestQueueStopTimeoutAbandons(t *testing.T) {
	started := make(chan struct{}, 1)
	var cancelled atomic.Bool
	q, reader := newTestQueue(t, Config{Capacity: 100, Partitions: 1}, func(ctx context.Context, _ string, _ *auditv1.Event) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done() // blocks until Stop gives up
		cancelled.Store(true)
	})
	ctx := context.Background()
	var evs []*auditv1.Event
	for i := range 5 {
		evs = append(evs, queueEvent("ns", "p", strconv.Itoa(i)))
	}
	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Enqueue(ctx, "c", evs))
	<-started

	stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := q.Stop(stopCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "4 events abandoned")
	assert.True(t, cancelled.Load(), "the handler's context is cancelled")
	assert.Equal(t, 0, q.Len())
	require.ErrorIs(t, q.Flush(ctx), ErrStopped)

	sums := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(4), sums["kelemetry.audit.queue.dropped{reason=stopped}"])
}

func TestQueueStopWithoutStart(t *testing.T) {
	q, _ := newTestQueue(t, Config{}, func(context.Context, string, *auditv1.Event) {})
	require.NoError(t, q.Stop(context.Background()))

	q2, _ := newTestQueue(t, Config{}, func(context.Context, string, *auditv1.Event) {})
	require.NoError(t, q2.Enqueue(context.Background(), "c", []*auditv1.Event{queueEvent("ns", "p", "1")}))
	err := q2.Stop(context.Background())
	require.ErrorIs(t, err, ErrStopped, "events enqueued without Start are abandoned")
	assert.Equal(t, 0, q2.Len())
}

func TestQueueEnqueueWaitBackpressure(t *testing.T) {
	gate := make(chan struct{})
	var h handledLog
	q, _ := newTestQueue(t, Config{Capacity: 4, Partitions: 2}, func(ctx context.Context, cluster string, ev *auditv1.Event) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		h.handle(ctx, cluster, ev)
	})
	ctx := context.Background()
	var evs []*auditv1.Event
	for i := range 10 {
		evs = append(evs, queueEvent("ns", "p"+strconv.Itoa(i), strconv.Itoa(i)))
	}
	require.NoError(t, q.Enqueue(ctx, "c", evs[:4]))

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, q.EnqueueWait(short, "c", evs[4:6]), context.DeadlineExceeded)
	require.ErrorIs(t, q.EnqueueWait(ctx, "c", evs[4:]), ErrBatchTooLarge, "6 events never fit a capacity of 4")

	require.NoError(t, q.Start(ctx))
	waited := make(chan error, 1)
	go func() { waited <- q.EnqueueWait(ctx, "c", evs[4:8]) }() // needs the whole queue empty
	select {
	case err := <-waited:
		t.Fatalf("EnqueueWait returned %v while the queue was full", err)
	case <-time.After(30 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("EnqueueWait did not return")
	}
	require.NoError(t, q.EnqueueWait(ctx, "c", evs[8:]))
	require.NoError(t, q.Flush(ctx))
	assert.Equal(t, 10, h.count())
}

func TestQueueEnqueueWaitWakesOnRoom(t *testing.T) {
	gate := make(chan struct{})
	q, _ := newTestQueue(t, Config{Capacity: 3, Partitions: 1}, func(ctx context.Context, _ string, _ *auditv1.Event) {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	})
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "1"), queueEvent("n", "a", "2"), queueEvent("n", "a", "3")}))
	var wg sync.WaitGroup
	var errs [5]error
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = q.EnqueueWait(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "w"+strconv.Itoa(i))})
		}()
	}
	require.Eventually(t, func() bool { return q.roomWaiters.Load() == int32(len(errs)) }, 5*time.Second, time.Millisecond,
		"every EnqueueWait waits for room")
	close(gate)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, q.Flush(ctx))
	assert.Equal(t, 0, q.Len())
}

func TestQueueStopWakesEnqueueWait(t *testing.T) {
	q, _ := newTestQueue(t, Config{Capacity: 1, Partitions: 1}, func(context.Context, string, *auditv1.Event) {})
	ctx := context.Background()
	require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "1")}))
	waited := make(chan error, 1)
	go func() { waited <- q.EnqueueWait(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "2")}) }()
	require.Eventually(t, func() bool { return q.roomWaiters.Load() == 1 }, 5*time.Second, time.Millisecond,
		"EnqueueWait waits for room")
	_ = q.Stop(ctx) // never started: abandons the queued event
	select {
	case err := <-waited:
		require.ErrorIs(t, err, ErrStopped)
	case <-time.After(5 * time.Second):
		t.Fatal("EnqueueWait did not return after Stop")
	}
}

func TestQueueHandlerPanicIsContained(t *testing.T) {
	var h handledLog
	q, _ := newTestQueue(t, Config{Capacity: 10, Partitions: 1}, func(ctx context.Context, cluster string, ev *auditv1.Event) {
		if ev.AuditID == "boom" {
			panic(errors.New("boom"))
		}
		h.handle(ctx, cluster, ev)
	})
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "1"), queueEvent("n", "a", "boom"), queueEvent("n", "a", "3")}))
	require.NoError(t, q.Flush(ctx))
	assert.Equal(t, []string{"1", "3"}, h.byName["a"])
}

func TestQueueFlushHonoursContext(t *testing.T) {
	q, _ := newTestQueue(t, Config{}, func(context.Context, string, *auditv1.Event) {})
	ctx := context.Background()
	require.NoError(t, q.Flush(ctx), "nothing to flush")
	require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("n", "a", "1")}))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, q.Flush(short), context.DeadlineExceeded, "not started: nothing is handled")
	require.NoError(t, q.Start(ctx))
	require.NoError(t, q.Flush(ctx))
}

func TestQueueConcurrentEnqueue(t *testing.T) {
	var handled atomic.Int64
	q, _ := newTestQueue(t, Config{Capacity: 1000, Partitions: 4}, func(context.Context, string, *auditv1.Event) { handled.Add(1) })
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				batch := []*auditv1.Event{queueEvent("n", fmt.Sprintf("g%d-%d", g, i%5), "x"), queueEvent("n", "shared", "y")}
				if i%2 == 0 {
					if q.Enqueue(ctx, "c", batch) == nil {
						accepted.Add(2)
					}
				} else if q.EnqueueWait(ctx, "c", batch) == nil {
					accepted.Add(2)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, q.Stop(ctx))
	assert.Equal(t, accepted.Load(), handled.Load())
	assert.Equal(t, 0, q.Len())
}

// bigEvent is queueEvent with a response body of n bytes.
func bigEvent(name, id string, n int) *auditv1.Event {
	ev := queueEvent("ns", name, id)
	ev.ResponseObject = make([]byte, n)
	return ev
}

func TestQueueBoundedByBytes(t *testing.T) {
	release := make(chan struct{})
	var h handledLog
	q, reader := newTestQueue(t, Config{Capacity: 1000, MaxBytes: 10 << 20, Partitions: 2}, func(ctx context.Context, c string, ev *auditv1.Event) {
		<-release
		h.handle(ctx, c, ev)
	})
	ctx := context.Background()
	const mib = 1 << 20

	// Four 2 MiB events fit in 10 MiB; a fifth 2 MiB event does not, though the queue has room for
	// 995 more events.
	for i := range 4 {
		require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{bigEvent("p"+strconv.Itoa(i), strconv.Itoa(i), 2*mib)}))
	}
	assert.Equal(t, int64(4*(2*mib+bareEventBytes)), q.Bytes())
	err := q.Enqueue(ctx, "c", []*auditv1.Event{bigEvent("p9", "9", 2*mib), queueEvent("ns", "small", "s")})
	require.ErrorIs(t, err, ErrFull)
	assert.NotErrorIs(t, err, ErrBatchTooLarge)
	assert.Contains(t, err.Error(), "bytes")
	assert.Equal(t, 4, q.Len(), "the refused batch queued nothing, not even its small event")
	assert.Equal(t, int64(4*(2*mib+bareEventBytes)), q.Bytes(), "a refused batch gives its bytes back")

	// A batch over the whole byte bound can never fit.
	err = q.Enqueue(ctx, "c", []*auditv1.Event{bigEvent("huge", "h", 11*mib)})
	require.ErrorIs(t, err, ErrBatchTooLarge)
	require.ErrorIs(t, q.EnqueueWait(ctx, "c", []*auditv1.Event{bigEvent("huge", "h", 11*mib)}), ErrBatchTooLarge)

	sums := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(4*(2*mib+bareEventBytes)), sums["kelemetry.audit.queue.bytes"])
	assert.Equal(t, int64(2+1+1), sums["kelemetry.audit.queue.rejected{reason=full}"], "refused, not lost")

	// Handling gives the bytes back: a waiting enqueuer gets in.
	require.NoError(t, q.Start(ctx))
	waited := make(chan error, 1)
	go func() { waited <- q.EnqueueWait(ctx, "c", []*auditv1.Event{bigEvent("p9", "9", 2*mib)}) }()
	close(release)
	require.NoError(t, <-waited)
	require.NoError(t, q.Flush(ctx))
	assert.Equal(t, 5, h.count())
	assert.Zero(t, q.Len())
	assert.Zero(t, q.Bytes(), "every handled event's bytes are released")
}

func TestQueueAbandonReleasesBytes(t *testing.T) {
	q, _ := newTestQueue(t, Config{MaxBytes: 1 << 20}, func(context.Context, string, *auditv1.Event) {})
	require.NoError(t, q.Enqueue(context.Background(), "c", []*auditv1.Event{bigEvent("p", "1", 1000), bigEvent("q", "2", 2000)}))
	assert.Equal(t, int64(3000+2*bareEventBytes), q.Bytes())
	require.ErrorIs(t, q.Stop(context.Background()), ErrStopped)
	assert.Zero(t, q.Bytes())
}

// bareEventBytes is what the queue counts for an event without bodies.
var bareEventBytes = auditv1.EventBytes(&auditv1.Event{})

// Each kind of queue exports its counters at 0 from the start, each reason included.
func TestQueueCountersStartAtZero(t *testing.T) {
	handle := func(context.Context, string, *auditv1.Event) {}
	newReader := func() (*sdkmetric.ManualReader, telemetry.Settings) {
		reader := sdkmetric.NewManualReader()
		return reader, telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	}
	t.Run("durable", func(t *testing.T) {
		reader, ts := newReader()
		d, err := newDurable(Config{Dir: t.TempDir()}, Deps{Handle: handle, Telemetry: ts})
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Stop(context.Background()) })
		for _, name := range []string{"kelemetry.audit.queue.disk_rejected", "kelemetry.audit.queue.replayed",
			"kelemetry.audit.queue.sink_sync_failures", "kelemetry.audit.queue.corrupt_records", "kelemetry.audit.queue.accepted"} {
			assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, name), name)
		}
		assert.Equal(t, telemetrytest.Zeros("reason", "full", "stopped"), telemetrytest.Points(t, reader, "kelemetry.audit.queue.rejected"))
		assert.Equal(t, telemetrytest.Zeros("reason", "stopped"), telemetrytest.Points(t, reader, "kelemetry.audit.queue.dropped"))
	})
	t.Run("nats", func(t *testing.T) {
		reader, ts := newReader()
		q, err := newNATS(natsqueue.Config{URLs: []string{"nats://127.0.0.1:4222"}}, Deps{Handle: handle, Telemetry: ts})
		require.NoError(t, err)
		t.Cleanup(func() { _ = q.Stop(context.Background()) })
		for _, name := range []string{"kelemetry.audit.queue.accepted", "kelemetry.audit.queue.sink_sync_failures", "kelemetry.audit.queue.corrupt_records"} {
			assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, name), name)
		}
		assert.Equal(t, telemetrytest.Zeros("reason", "full", "unavailable", "stopped", "error"),
			telemetrytest.Points(t, reader, "kelemetry.audit.queue.rejected"))
	})
}
