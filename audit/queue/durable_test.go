package queue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// fullEvent sets every field of Event.
func fullEvent() *auditv1.Event {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	return &auditv1.Event{
		Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: "RequestResponse", AuditID: "a-1", Stage: "ResponseComplete",
		RequestURI: "/api/v1/namespaces/ns/pods/p", Verb: "update",
		User:             auditv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"system:authenticated", ""}},
		ImpersonatedUser: &auditv1.UserInfo{Username: "bob"},
		SourceIPs:        []string{"10.0.0.1"},
		UserAgent:        "kubectl",
		ObjectRef: &auditv1.ObjectReference{Resource: "pods", Namespace: "ns", Name: "p", UID: "uid", APIGroup: "",
			APIVersion: "v1", ResourceVersion: "42", Subresource: "status"},
		ResponseStatus: &auditv1.Status{Status: "Failure", Message: "conflict", Reason: "Conflict", Code: 409,
			Details: &auditv1.StatusDetails{Causes: []auditv1.StatusCause{{Type: "FieldValueInvalid", Message: "bad", Field: "spec"}}}},
		RequestObject:            json.RawMessage(`{"kind":"Pod"}`),
		ResponseObject:           json.RawMessage(`{}`),
		RequestReceivedTimestamp: ts,
		StageTimestamp:           ts.Add(time.Millisecond),
		Annotations:              map[string]string{"authorization.k8s.io/decision": "allow"},
	}
}

func TestDurableCodecRoundTrip(t *testing.T) {
	exported := 0
	for f := range reflect.TypeFor[auditv1.Event]().Fields() {
		if f.IsExported() {
			exported++
		}
	}
	require.Equal(t, codecFields, exported,
		"Event has a field the durable queue's codec does not write: add it to appendEvent and event()")
	events := []*auditv1.Event{fullEvent(), {AuditID: "bare"}, queueEvent("ns", "q", "a-3")}
	events[1].ResponseStatus = &auditv1.Status{Details: &auditv1.StatusDetails{}}
	rec := appendBatch(nil, "alpha", events)
	cluster, got, err := decodeBatch(rec)
	require.NoError(t, err)
	assert.Equal(t, "alpha", cluster)
	require.Len(t, got, len(events))
	for i := range events {
		assert.Equal(t, events[i], got[i], "event %d", i)
	}

	// Every truncation, and trailing bytes, fail without panicking.
	for n := range len(rec) {
		_, _, err := decodeBatch(rec[:n])
		require.Error(t, err, "truncated at %d", n)
	}
	_, _, err = decodeBatch(append(rec, 0))
	require.Error(t, err)
}

func FuzzDurableCodec(f *testing.F) {
	f.Add(appendBatch(nil, "c", []*auditv1.Event{fullEvent()}))
	f.Fuzz(func(_ *testing.T, data []byte) {
		_, _, _ = decodeBatch(data)
	})
}

func openTestLog(t *testing.T, dir string, maxBytes, segBytes int64) (*diskLog, []batchLoc) {
	t.Helper()
	l, pending, err := openDiskLog(dir, maxBytes, segBytes, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return l, pending
}

// crash drops the log as kill -9 would: no final sync, no more writes.
func crash(l *diskLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.closeFiles()
	_ = l.lock.Close() // the kernel drops a dead process's locks
}

func appendTestBatch(t *testing.T, l *diskLog, name string) uint64 {
	t.Helper()
	id, err := l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", name, "id-"+name)}))
	require.NoError(t, err)
	return id
}

// appendNumberedBatches appends n batches to l, named "0" to "n-1", and returns their IDs.
func appendNumberedBatches(t *testing.T, l *diskLog, n int) []uint64 {
	t.Helper()
	ids := make([]uint64, 0, n)
	for i := range n {
		ids = append(ids, appendTestBatch(t, l, strconv.Itoa(i)))
	}
	return ids
}

func replayedNames(t *testing.T, pending []batchLoc) []string {
	t.Helper()
	var names []string
	for _, loc := range pending {
		body, err := readBatch(loc)
		require.NoError(t, err)
		_, evs, err := decodeBatch(body)
		require.NoError(t, err)
		for _, ev := range evs {
			names = append(names, ev.ObjectRef.Name)
		}
	}
	return names
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	require.NoError(t, err)
	return m
}

func TestDiskLogReplaysUnhandledAfterCrash(t *testing.T) {
	dir := t.TempDir()
	l, pending := openTestLog(t, dir, 1<<20, 1<<20)
	require.Empty(t, pending)
	a := appendTestBatch(t, l, "a")
	b := appendTestBatch(t, l, "b")
	c := appendTestBatch(t, l, "c")
	assert.Less(t, a, b)
	assert.Less(t, b, c)
	l.Ack(b)
	crash(l)

	l, pending = openTestLog(t, dir, 1<<20, 1<<20)
	assert.Equal(t, []string{"a", "c"}, replayedNames(t, pending))
	// New IDs never repeat old ones.
	d := appendTestBatch(t, l, "d")
	assert.Greater(t, d, c)
	for _, loc := range pending {
		l.Ack(loc.id)
	}
	require.NoError(t, l.Close())

	// After a clean close everything handled stays handled; only d is left.
	l, pending = openTestLog(t, dir, 1<<20, 1<<20)
	assert.Equal(t, []string{"d"}, replayedNames(t, pending))
	l.Ack(pending[0].id)
	require.NoError(t, l.Close())
	l, pending = openTestLog(t, dir, 1<<20, 1<<20)
	assert.Empty(t, pending)
	require.NoError(t, l.Close())
	assert.Len(t, segFiles(t, dir), 1, "only the active segment is left")
}

func TestDiskLogAcksManyInOneCall(t *testing.T) {
	dir := t.TempDir()
	l, _ := openTestLog(t, dir, 1<<20, 512)
	ids := appendNumberedBatches(t, l, 12)
	segs := len(segFiles(t, dir))
	require.Greater(t, segs, 2)
	// All but the last two, with an unknown ID and a repeated one among them: those write nothing.
	l.Ack(append([]uint64{ids[11] + 1000, ids[3]}, ids[:10]...)...)
	l.Ack()
	assert.Less(t, len(segFiles(t, dir)), segs, "the handled segments are deleted")
	_, acks, _, err := l.scan(l.active().path)
	require.NoError(t, err)
	assert.ElementsMatch(t, ids[:10], acks, "one ack record per handled batch")
	crash(l)

	l, pending := openTestLog(t, dir, 1<<20, 512)
	assert.Equal(t, []string{"10", "11"}, replayedNames(t, pending))
	require.NoError(t, l.Close())
}

func TestDiskLogSkipsTornTail(t *testing.T) {
	dir := t.TempDir()
	l, _ := openTestLog(t, dir, 1<<20, 1<<20)
	appendTestBatch(t, l, "a")
	appendTestBatch(t, l, "b")
	path := l.active().path
	crash(l)
	// A record cut short by the crash, then a record with a bad checksum.
	rec := appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "torn", "x")})
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(data, rec[:len(rec)/2]...), 0o600))

	l, pending := openTestLog(t, dir, 1<<20, 1<<20)
	assert.Equal(t, []string{"a", "b"}, replayedNames(t, pending))
	assert.Equal(t, int64(1), l.corruptRecords.Load())
	// Appends go to a new segment, after the torn one.
	appendTestBatch(t, l, "c")
	crash(l)
	l, pending = openTestLog(t, dir, 1<<20, 1<<20)
	assert.Equal(t, []string{"a", "b", "c"}, replayedNames(t, pending))
	require.NoError(t, l.Close())
}

// severalSegments opens a log in dir of small segments and fills more than 4 of them: it returns
// the batches' IDs, the number of segment files and the log's size.
func severalSegments(t *testing.T, dir string) (l *diskLog, ids []uint64, segs int, full int64) {
	t.Helper()
	l, _ = openTestLog(t, dir, 1<<20, 512)
	ids = appendNumberedBatches(t, l, 40)
	segs = len(segFiles(t, dir))
	require.Greater(t, segs, 4)
	return l, ids, segs, l.Size()
}

func TestDiskLogDeletesHandledSegments(t *testing.T) {
	dir := t.TempDir()
	l, ids, segs, full := severalSegments(t, dir)
	// Handling out of order: the oldest segment holds everything back until its batches are done.
	for _, id := range ids[1:] {
		l.Ack(id)
	}
	// (The active segment, all handled, was replaced by a new one: it stays behind the first too.)
	assert.Len(t, segFiles(t, dir), segs+1, "the first batch still holds every segment")
	l.Ack(ids[0])
	assert.Len(t, segFiles(t, dir), 1, "handled segments are deleted, the active one stays")
	assert.Less(t, l.Size(), full/4)
	assert.Equal(t, int64(segs), l.deletedSegs.Load())
	require.NoError(t, l.Close())
}

func TestDiskLogBoundedBytes(t *testing.T) {
	dir := t.TempDir()
	l, _ := openTestLog(t, dir, 2048, 512)
	var ids []uint64
	var err error
	for {
		var id uint64
		id, err = l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "x", "id")}))
		if err != nil {
			break
		}
		ids = append(ids, id)
		require.Less(t, len(ids), 100)
	}
	require.ErrorIs(t, err, ErrFull)
	assert.NotErrorIs(t, err, ErrBatchTooLarge)
	assert.LessOrEqual(t, l.Size(), int64(2048))
	for _, id := range ids {
		l.Ack(id)
	}
	appendTestBatch(t, l, "room-again")

	_, err = l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{bigEvent("big", "id", 4096)}))
	require.ErrorIs(t, err, ErrBatchTooLarge)
	require.NoError(t, l.Close())
}

func TestDiskLogGroupCommit(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir(), 1<<20, 1<<20)
	// Hold the sync lock as a running fsync would: the appends meanwhile write and wait, then
	// share one fsync.
	l.syncMu.Lock()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { appendTestBatch(t, l, strconv.Itoa(i)) })
	}
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.batchSeg) == n
	}, 10*time.Second, time.Millisecond)
	l.syncMu.Unlock()
	wg.Wait()
	assert.Equal(t, int64(1), l.syncs.Load())
	require.NoError(t, l.Close())
}

func newTestDurable(t *testing.T, cfg Config, deps Deps) *durableQueue {
	t.Helper()
	d, err := newDurable(cfg, deps)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Stop(ctx)
	})
	return d
}

func TestDurableQueueReplaysWhatWasNotHandled(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Partitions: 2}
	ctx := context.Background()

	// First run: the batch on "stuck" is never handled; Stop gives up on it.
	release := make(chan struct{})
	first := &handledLog{}
	d := newTestDurable(t, cfg, Deps{Handle: func(ctx context.Context, c string, ev *auditv1.Event) {
		if ev.ObjectRef.Name == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
		}
		first.handle(ctx, c, ev)
	}})
	require.NoError(t, d.Start(ctx))
	require.Eventually(t, func() bool { return d.Enqueue(ctx, "c", nil) == nil && !d.replaying.Load() }, 5*time.Second, time.Millisecond)
	require.NoError(t, d.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("ns", "done", "1"), queueEvent("ns", "done", "2")}))
	require.NoError(t, d.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("ns", "stuck", "3")}))
	require.Eventually(t, func() bool { return first.count() == 2 }, 5*time.Second, time.Millisecond)
	stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.Error(t, d.Stop(stopCtx), "the stuck event is abandoned")
	assert.Equal(t, []string{"1", "2"}, first.byName["done"])

	// Second run: only the batch not handled comes back, and new batches wait for it.
	second := &handledLog{}
	d = newTestDurable(t, cfg, Deps{Handle: second.handle})
	require.ErrorIs(t, d.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("ns", "new", "4")}), ErrFull, "refused before the replay")
	require.NoError(t, d.Start(ctx))
	require.NoError(t, d.EnqueueWait(ctx, "c", []*auditv1.Event{queueEvent("ns", "stuck", "5")}))
	require.NoError(t, d.Flush(ctx))
	assert.Equal(t, map[string][]string{"stuck": {"3", "5"}}, second.byName)
	require.NoError(t, d.Stop(ctx))

	// Third run: nothing to replay.
	third := &handledLog{}
	d = newTestDurable(t, cfg, Deps{Handle: third.handle})
	require.NoError(t, d.Start(ctx))
	require.Eventually(t, func() bool { return !d.replaying.Load() }, 5*time.Second, time.Millisecond)
	require.NoError(t, d.Flush(ctx))
	assert.Equal(t, 0, third.count())
	require.NoError(t, d.Stop(ctx))
	assert.Len(t, segFiles(t, dir), 1)
}

func TestDurableQueueDiskFull(t *testing.T) {
	block := make(chan struct{})
	d := newTestDurable(t, Config{Dir: t.TempDir(), MaxDiskBytes: 1024, SegmentBytes: 256}, Deps{Handle: func(ctx context.Context, _ string, _ *auditv1.Event) {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}})
	ctx := context.Background()
	require.NoError(t, d.Start(ctx))
	require.Eventually(t, func() bool { return !d.replaying.Load() }, 5*time.Second, time.Millisecond)
	var err error
	for i := 0; err == nil; i++ {
		require.Less(t, i, 100)
		err = d.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("ns", "p"+strconv.Itoa(i), "id")})
	}
	require.ErrorIs(t, err, ErrFull)
	assert.LessOrEqual(t, d.DiskBytes(), int64(1024))
	close(block)
	require.NoError(t, d.Flush(ctx))
	require.NoError(t, d.Enqueue(ctx, "c", []*auditv1.Event{queueEvent("ns", "after", "id")}), "handled segments made room")
}

func TestDurableQueueConfig(t *testing.T) {
	yes, no := true, false
	assert.False(t, Config{}.IsDurable())
	assert.True(t, Config{Dir: "d"}.IsDurable())
	assert.False(t, Config{Dir: "d", Durable: &no}.IsDurable())
	require.Error(t, Config{Durable: &yes}.Validate())
	_, err := newDurable(Config{}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.Error(t, err)
	// A dir that cannot be created fails at construction.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = newDurable(Config{Dir: filepath.Join(file, "q")}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrFull))
}

// A batch is done only once the sinks synced after its events were handled: while the sync
// fails, the handled batch stays in the log and comes back after a restart.
func TestDurableQueueMarksDoneAfterSinkSync(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var syncs atomic.Int64
	failing := errors.New("log not synced")

	first := &handledLog{}
	d := newTestDurable(t, Config{Dir: dir}, Deps{Handle: first.handle, Sync: func(context.Context) error { syncs.Add(1); return failing }})
	require.NoError(t, d.Start(ctx))
	require.NoError(t, d.EnqueueWait(ctx, "c", []*auditv1.Event{queueEvent("ns", "p", "1")}))
	require.NoError(t, d.Flush(ctx))
	require.Eventually(t, func() bool { return syncs.Load() > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, d.Stop(ctx))
	assert.Equal(t, 1, first.count())

	second := &handledLog{}
	d = newTestDurable(t, Config{Dir: dir}, Deps{Handle: second.handle, Sync: func(context.Context) error { syncs.Add(1); return nil }})
	require.NoError(t, d.Start(ctx))
	require.NoError(t, d.EnqueueWait(ctx, "c", nil))
	require.NoError(t, d.Flush(ctx))
	assert.Equal(t, map[string][]string{"p": {"1"}}, second.byName, "replayed: the sinks never synced it")
	require.NoError(t, d.Stop(ctx))

	third := &handledLog{}
	d = newTestDurable(t, Config{Dir: dir}, Deps{Handle: third.handle})
	require.NoError(t, d.Start(ctx))
	require.NoError(t, d.EnqueueWait(ctx, "c", nil))
	require.NoError(t, d.Flush(ctx))
	assert.Equal(t, 0, third.count())
}
