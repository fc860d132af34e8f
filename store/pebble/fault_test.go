package pebble

import (
	"context"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// faultFS is the real filesystem with injectable faults: full makes every write fail with
// ENOSPC and reports no free space; failWrites only makes writes fail (a quota, or a failing
// disk that still reports space).
type faultFS struct {
	vfs.FS
	full, failWrites atomic.Bool
	writeErrs        atomic.Int64
}

func newFaultFS() *faultFS { return &faultFS{FS: vfs.Default} }

func (f *faultFS) failing() bool { return f.full.Load() || f.failWrites.Load() }

func (f *faultFS) fail() error {
	f.writeErrs.Add(1)
	return syscall.ENOSPC
}

func (f *faultFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.failing() {
		return nil, f.fail()
	}
	file, err := f.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.failing() {
		return nil, f.fail()
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Link(oldname, newname string) error {
	if f.failing() {
		return f.fail()
	}
	return f.FS.Link(oldname, newname)
}

func (f *faultFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := f.FS.GetDiskUsage(path)
	if f.full.Load() {
		u.AvailBytes = 0
	}
	return u, err
}

func (f *faultFS) Unwrap() vfs.FS { return f.FS }

type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.failing() {
		return 0, f.fs.fail()
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failing() {
		return 0, f.fs.fail()
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Preallocate(off, n int64) error {
	if f.fs.failing() {
		return f.fs.fail()
	}
	return f.File.Preallocate(off, n)
}

func (f *faultFile) Sync() error {
	if f.fs.failing() {
		return f.fs.fail()
	}
	return f.File.Sync()
}

func (f *faultFile) SyncData() error {
	if f.fs.failing() {
		return f.fs.fail()
	}
	return f.File.SyncData()
}

func (f *faultFile) SyncTo(n int64) (bool, error) {
	if f.fs.failing() {
		return false, f.fs.fail()
	}
	return f.File.SyncTo(n)
}

func openFaultPebble(t *testing.T, cfg Config, fs vfs.FS) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	p, err := openPebble(context.Background(), cfg, 0, telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}, fs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.close() })
	return p
}

// expireSpaceCheck makes the store's last free-space check stale, as if spaceRecheck had passed
// since it: the next write checks the disk again (a fake clock for writeSpace).
func expireSpaceCheck(p *Store) { p.spaceAt.Store(0) }

// withinTime fails the test when fn does not return within d (a wedged store).
func withinTime(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// A full disk refuses writes with a clear error, keeps reads and retention working, reports
// itself unhealthy, and recovers by itself when space returns.
func TestPebbleDiskFull(t *testing.T) {
	ctx := context.Background()
	ffs := newFaultFS()
	p := openFaultPebble(t, Config{MaxAge: time.Hour, MaxBytes: 64 << 20}, ffs)
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 10, 1024)))
	require.NoError(t, p.Health(ctx))

	// The disk fills up while the store is idle: the spans above committed (pendingDelay after
	// the Export), and the last free-space check long past.
	require.Eventually(t, func() bool { return pendingLen(p) == 0 }, 5*time.Second, time.Millisecond)
	ffs.full.Store(true)
	expireSpaceCheck(p)
	for i := range 50 {
		err := p.Export(ctx, windowSpans(obj, t0.Add(win), 10, 1024))
		require.Error(t, err, "write %d on a full disk", i)
		assert.ErrorIs(t, err, query.ErrUnavailable)
		assert.ErrorIs(t, err, syscall.ENOSPC)
	}
	herr := p.Health(ctx)
	require.Error(t, herr)
	assert.ErrorIs(t, herr, query.ErrUnavailable)
	assert.ErrorIs(t, herr, syscall.ENOSPC, "the reason names the full disk")

	got, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0))
	require.NoError(t, err, "reads keep working")
	assert.Len(t, got, 11)
	withinTime(t, 10*time.Second, "retention on a full disk", func() {
		_ = p.retain(ctx, t0.Add(30*time.Minute))
	})

	ffs.full.Store(false)
	withinTime(t, 10*time.Second, "recovery", func() { p.recoverStep(ctx) })
	require.NoError(t, p.Health(ctx))
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0.Add(win), 10, 1024)))
	_, err = p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0.Add(win)))
	require.NoError(t, err)
}

// Write errors while the disk still reports free space (a quota, a failing device): the store
// notices the failed write, refuses further writes instead of crashing or hanging, and reopens
// the database once a probe write succeeds again.
func TestPebbleWriteErrorsRecover(t *testing.T) {
	ctx := context.Background()
	ffs := newFaultFS()
	p := openFaultPebble(t, Config{}, ffs)
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 10, 1024)))
	require.NoError(t, p.diskFlush(), "persist the first window")

	ffs.failWrites.Store(true)
	// The write-ahead log is written in the background, a block (32 KiB) at a time: writes are
	// acknowledged until the log's writer fails; the store notices it and refuses the next ones.
	var refusal error
	require.Eventually(t, func() bool {
		refusal = p.Export(ctx, windowSpans(obj, t0.Add(win), 1, 1024))
		return refusal != nil
	}, 10*time.Second, time.Millisecond, "writes refused after the log write failed")
	require.ErrorIs(t, refusal, query.ErrUnavailable)
	require.Positive(t, ffs.writeErrs.Load())
	require.Error(t, p.Health(ctx))
	for range 20 {
		err := p.Export(ctx, windowSpans(obj, t0.Add(2*win), 10, 1024))
		require.ErrorIs(t, err, query.ErrUnavailable)
	}
	_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0))
	require.NoError(t, err, "reads keep working")

	withinTime(t, 10*time.Second, "recovery attempt while failing", func() { p.recoverStep(ctx) })
	require.Error(t, p.Health(ctx), "still failing")

	ffs.failWrites.Store(false)
	withinTime(t, 10*time.Second, "recovery", func() { p.recoverStep(ctx) })
	require.NoError(t, p.Health(ctx))
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0.Add(2*win), 10, 1024)))
	for _, w := range []time.Time{t0, t0.Add(2 * win)} {
		_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
		require.NoError(t, err)
	}
}

// Opening a store on a full disk, or on one that reports space but fails every write (a quota,
// a failing device), neither hangs nor fails: it serves reads, refuses writes, and becomes
// writable when the disk works again.
func TestPebbleOpenOnFaultyDisk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  func(*faultFS) *atomic.Bool
		health string
	}{
		{"full", func(f *faultFS) *atomic.Bool { return &f.full }, "read-only"},
		{"write errors", func(f *faultFS) *atomic.Bool { return &f.failWrites }, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			obj := ref("c", "", "pods", "ns", "p")
			first := openFaultPebble(t, Config{Dir: dir}, vfs.Default)
			require.NoError(t, first.Export(ctx, windowSpans(obj, t0, 10, 1024)))
			require.NoError(t, first.close())

			ffs := newFaultFS()
			fault := tc.fault(ffs)
			fault.Store(true)
			var p *Store
			withinTime(t, 30*time.Second, "open on a faulty disk", func() {
				p = openFaultPebble(t, Config{Dir: dir}, ffs)
			})
			_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0))
			require.NoError(t, err, "reads work")
			require.ErrorIs(t, p.Export(ctx, windowSpans(obj, t0, 1, 16)), query.ErrUnavailable)
			herr := p.Health(ctx)
			require.Error(t, herr)
			assert.Contains(t, herr.Error(), tc.health)

			fault.Store(false)
			withinTime(t, 10*time.Second, "recovery", func() { p.recoverStep(ctx) })
			require.NoError(t, p.Health(ctx))
			require.NoError(t, p.Export(ctx, windowSpans(obj, t0.Add(win), 1, 16)))
		})
	}
}

// Stop of a store whose writes hang (a stalled disk) ends within its deadline.
func TestPebbleShutdownBoundedOnStuckStore(t *testing.T) {
	p := openTestPebble(t, Config{}, nil)
	p.mu.RLock() // a write stuck inside Pebble holds the lock
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := p.Stop(ctx)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	p.mu.RUnlock() // the write ends: the close finishes in the background
	require.Eventually(t, func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.closed
	}, 10*time.Second, 10*time.Millisecond)
}

// A panic inside Pebble's commit path (here: a batch of another database) does not crash the
// process: the write fails, the store refuses further writes and says a restart is needed,
// reads keep working, and close does not touch the stuck database.
func TestPebbleCommitPanicIsRecovered(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	other := openTestPebble(t, Config{}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 2, 16)))
	require.NoError(t, p.Sync(ctx), "the spans are committed before the panic")

	b := other.db.NewBatch()
	require.NoError(t, b.Set([]byte("k"), []byte("v"), nil))
	err := p.apply(b) // Pebble panics: the batch belongs to another database
	_ = b.Close()
	require.ErrorIs(t, err, query.ErrUnavailable)

	require.ErrorIs(t, p.Export(ctx, windowSpans(obj, t0, 1, 16)), query.ErrUnavailable)
	herr := p.Health(ctx)
	require.Error(t, herr)
	assert.Contains(t, herr.Error(), "restart")
	_, err = p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0))
	require.NoError(t, err, "reads keep working")
	p.recoverStep(ctx)
	require.ErrorIs(t, p.Export(ctx, windowSpans(obj, t0, 1, 16)), query.ErrUnavailable, "no reopen of a stuck database")

	db := p.db
	require.NoError(t, p.close(), "Close leaves the stuck database alone")
	require.NoError(t, db.Close(), "(the test closes it: this one is not really stuck)")
}
