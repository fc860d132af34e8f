package queue

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// faultySeg makes the log's segment files fail on demand, as a full disk or a failing device
// would: a failing write writes half of its bytes first (a torn record).
type faultySeg struct {
	f          dataSyncFile
	failWrites *atomic.Bool
	failSyncs  *atomic.Bool
}

func (s faultySeg) Write(p []byte) (int, error) {
	if s.failWrites.Load() {
		n, _ := s.f.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return s.f.Write(p)
}

func (s faultySeg) Sync() error {
	if s.failSyncs.Load() {
		return syscall.EIO
	}
	return s.f.Sync()
}

func (s faultySeg) Close() error { return s.f.Close() }

// faultyLog opens a log in dir, of segments of segBytes, whose new segments fail while the flags
// are set.
func faultyLog(t *testing.T, dir string, segBytes int64) (l *diskLog, failWrites, failSyncs *atomic.Bool) {
	t.Helper()
	failWrites, failSyncs = new(atomic.Bool), new(atomic.Bool)
	l, pending := openTestLog(t, dir, 1<<20, segBytes)
	require.Empty(t, pending)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.create = func(path string) (segFile, error) {
		f, err := createSegFile(path)
		if err != nil {
			return nil, err
		}
		return faultySeg{f: f.(dataSyncFile), failWrites: failWrites, failSyncs: failSyncs}, nil
	}
	// Start a segment of the faulty kind.
	require.NoError(t, l.newSegment(l.active().num+1))
	return l, failWrites, failSyncs
}

// probeNow makes the next check of a failed log probe at once instead of after probeInterval.
func probeNow(l *diskLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failedAt = l.failedAt.Add(-probeInterval)
}

// A failed write is an operating state: batches are refused with ErrUnavailable (not stuck
// with the first error for good), and once a probe of a new segment succeeds the log takes them
// again. What was acknowledged before the failure and after it is replayed after a crash; the
// batch that failed is not (its sender was told).
func TestDiskLogRecoversAfterWriteFailure(t *testing.T) {
	dir := t.TempDir()
	l, failWrites, _ := faultyLog(t, dir, 1<<20)
	appendTestBatch(t, l, "a")

	failWrites.Store(true)
	_, err := l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "b", "id-b")}))
	require.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorIs(t, l.Health(), ErrUnavailable)
	assert.Contains(t, l.Health().Error(), "no space left on device")

	// Still failing: the probe fails too, and the log stays unavailable.
	probeNow(l)
	require.ErrorIs(t, l.Health(), ErrUnavailable)
	_, err = l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "b", "id-b")}))
	require.ErrorIs(t, err, ErrUnavailable)

	// Space is back: within probeInterval the log still answers from its state, then a probe
	// succeeds and batches are taken.
	failWrites.Store(false)
	require.ErrorIs(t, l.Health(), ErrUnavailable, "no probe before probeInterval")
	probeNow(l)
	require.NoError(t, l.Health())
	assert.Equal(t, int64(1), l.recoveries.Load())
	assert.GreaterOrEqual(t, l.failures.Load(), int64(2))
	c := appendTestBatch(t, l, "c")
	d := appendTestBatch(t, l, "d")
	l.Ack(c)
	crash(l)

	l, pending := openTestLog(t, dir, 1<<20, 1<<20)
	assert.Equal(t, []string{"a", "d"}, replayedNames(t, pending))
	require.NoError(t, l.Close())
	_ = d
}

// A batch written before an fsync failed is never acknowledged, even when a later fsync of a new
// segment succeeds: the failed segment's unsynced records are given up.
func TestDiskLogSyncFailureIsNotAcknowledgedLater(t *testing.T) {
	l, _, failSyncs := faultyLog(t, t.TempDir(), 1<<20)
	rec := appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "x", "id-x")})
	_, seg, end, err := l.write(rec)
	require.NoError(t, err)

	failSyncs.Store(true)
	_, err = l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "y", "id-y")}))
	require.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, syscall.EIO)

	failSyncs.Store(false)
	probeNow(l)
	appendTestBatch(t, l, "z") // synced in the new segment
	assert.ErrorIs(t, l.syncTo(seg, end), ErrUnavailable, "x was in the failed segment and never synced")
	require.NoError(t, l.Close())
}

// Repeated failed probes do not leave a file behind each.
func TestDiskLogFailedProbesLeaveNoFiles(t *testing.T) {
	dir := t.TempDir()
	l, failWrites, _ := faultyLog(t, dir, 1<<20)
	failWrites.Store(true)
	_, err := l.Append(appendBatch(batchBuffer(0), "c", []*auditv1.Event{queueEvent("ns", "b", "id-b")}))
	require.Error(t, err)
	before := len(segFiles(t, dir))
	for range 20 {
		probeNow(l)
		require.Error(t, l.Health())
	}
	assert.LessOrEqual(t, len(segFiles(t, dir)), before+1)
	require.NoError(t, l.Close())
}

// Handled data leaves the disk once handled: an active segment whose batches are all done is
// replaced and deleted as soon as it holds handledRotateBytes, without waiting to fill up.
func TestDurableQueueHandledDataLeavesTheDisk(t *testing.T) {
	d := newTestDurable(t, Config{Dir: t.TempDir()}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	ctx := context.Background()
	require.NoError(t, d.Start(ctx))
	require.Eventually(t, func() bool { return !d.replaying.Load() }, 5*time.Second, time.Millisecond)
	var written int64
	for i := 0; written < 4*handledRotateBytes; i++ {
		ev := bigEvent("p"+strconv.Itoa(i), "id-"+strconv.Itoa(i), 64<<10)
		require.NoError(t, d.Enqueue(ctx, "c", []*auditv1.Event{ev}))
		written += 64 << 10
	}
	require.NoError(t, d.Flush(ctx))
	require.Eventually(t, func() bool { return d.DiskBytes() < handledRotateBytes+128<<10 }, 5*time.Second, 10*time.Millisecond,
		"the log keeps %d bytes of handled data", d.DiskBytes())
}

// A second queue on the same folder is refused with one line naming the folder and the process
// that holds it; once the first closes, the folder is free.
func TestDurableQueueOneWriterPerFolder(t *testing.T) {
	dir := t.TempDir()
	d := newTestDurable(t, Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	_, err := newDurable(Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), dir)
	assert.Contains(t, err.Error(), "in use by process "+strconv.Itoa(os.Getpid()))
	assert.NotContains(t, err.Error(), "\n")
	require.NoError(t, d.Stop(context.Background()))
	d2, err := newDurable(Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.NoError(t, err)
	require.NoError(t, d2.Stop(context.Background()))
}

// lockHolderEnv names the folder a child test process holds (TestDurableQueueLockAcrossProcesses).
const lockHolderEnv = "KELEMETRY_TEST_HOLD_QUEUE_DIR"

// The same across processes: a second process cannot take a folder another process writes, and
// the first process's files are untouched.
func TestDurableQueueLockAcrossProcesses(t *testing.T) {
	if dir := os.Getenv(lockHolderEnv); dir != "" {
		// The child: open the queue, say so, and hold it until killed.
		d, err := newDurable(Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("holding")
		// Not a wait: the child holds the folder until the parent kills it; the minute only bounds
		// the life of a child whose parent died.
		time.Sleep(time.Minute)
		_ = d.Stop(context.Background())
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDurableQueueLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "holding", strings.TrimSpace(string(buf[:n])))
	segs := segFiles(t, dir)
	require.Len(t, segs, 1)

	_, err = newDurable(Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit queue folder "+dir+" is in use by process "+strconv.Itoa(cmd.Process.Pid))
	assert.Equal(t, segs, segFiles(t, dir), "the other process's segment is left alone")

	// Killed, its lock goes with it.
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	d, err := newDurable(Config{Dir: dir}, Deps{Handle: func(context.Context, string, *auditv1.Event) {}})
	require.NoError(t, err)
	require.NoError(t, d.Stop(context.Background()))
}
