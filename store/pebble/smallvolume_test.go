package pebble

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// smallVolumeFS is the real filesystem reporting the disk usage of a volume of size bytes that
// holds dir and other bytes of other files: what a small volume (a tmpfs, a small
// PersistentVolume) reports.
type smallVolumeFS struct {
	vfs.FS
	dir         string
	size, other uint64
}

func (f *smallVolumeFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	used, err := dirUsage(f.dir)
	if err != nil {
		return vfs.DiskUsage{}, err
	}
	used += f.other
	return vfs.DiskUsage{TotalBytes: f.size, UsedBytes: used, AvailBytes: f.size - min(used, f.size)}, nil
}

func (f *smallVolumeFS) Unwrap() vfs.FS { return f.FS }

// logRecorder is a slog handler that keeps the messages of records at Warn level and above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *logRecorder) WithGroup(string) slog.Handler                { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (h *logRecorder) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// fakeClock makes p's clock (the retention loop's) the returned value, in Unix nanoseconds.
func fakeClock(p *Store, start time.Time) *atomic.Int64 {
	clock := &atomic.Int64{}
	clock.Store(start.UnixNano())
	p.now = func() time.Time { return time.Unix(0, clock.Load()) }
	return clock
}

// fillOptions say what fillStore writes.
type fillOptions struct {
	events, perWindow int
	retainEvery       int           // run retention every this many events (0: never; the loop does it)
	patience          time.Duration // how long refused writes are retried (0: the first refusal stops)
}

// fillResult is what fillStore measured.
type fillResult struct {
	events, spans int
	refused       int   // refused writes that were retried
	stopped       error // the refusal that stopped the writes, nil when all were taken
}

// fillStore writes events (an object span and an event span with 2 KiB of incompressible
// attributes, about what one audit event with a diff stores) in consecutive windows of
// o.perWindow events, with clock one minute into the window being written.
func fillStore(ctx context.Context, t testing.TB, p *Store, clock *atomic.Int64, o fillOptions) fillResult {
	t.Helper()
	var res fillResult
	payload := make([]byte, 2048)
	for i := range o.events {
		w := t0.Add(time.Duration(i/o.perWindow) * win)
		now := w.Add(time.Minute)
		clock.Store(now.UnixNano())
		obj := ref("c", "", "pods", "ns", fmt.Sprintf("p-%d", i%500))
		ev := eventSpan(obj, w, fmt.Sprint(i), time.Duration(i%o.perWindow)*time.Millisecond)
		_, _ = rand.Read(payload)
		ev.Attributes = aggregator.Attrs{{Key: "payload", Value: string(payload)}}
		spans := []*aggregator.Span{objectSpan(obj, w), ev}
		for since := time.Now(); ; {
			err := p.Export(ctx, spans)
			if err == nil {
				break
			}
			if !errors.Is(err, query.ErrUnavailable) || time.Since(since) >= o.patience {
				res.stopped = err
				return res
			}
			res.refused++
			time.Sleep(20 * time.Millisecond) // a writer's back-off between retries (patience bounds them)
		}
		res.events++
		res.spans += len(spans)
		if o.retainEvery > 0 && (i+1)%o.retainEvery == 0 {
			require.NoError(t, p.retain(ctx, now))
		}
	}
	return res
}

func openVolumePebble(t *testing.T, cfg Config, fs *smallVolumeFS, logs *logRecorder) (*Store, error) {
	t.Helper()
	cfg.Dir = fs.dir
	p, err := openPebble(context.Background(), cfg, 0, telemetry.Settings{Logger: slog.New(logs)}, fs)
	if err == nil {
		t.Cleanup(func() { _ = p.close() })
	}
	return p, err
}

// Finding 6 of issue 35: nothing compared maxBytes with the filesystem. Opening the store now
// refuses a set maxBytes that cannot fit the filesystem with the write reserve beside it (one
// line, naming a value that fits), shrinks the default to fit with one warning, and warns about a
// maxBytes that leaves too little free space (other files take it).
func TestPebbleMaxBytesFitsFilesystem(t *testing.T) {
	const (
		mib = 1 << 20
		gib = 1 << 30
	)
	for _, tc := range []struct {
		name            string
		maxBytes        int64
		size, other     uint64
		err             string // the error, empty when the store opens
		warn            string // the one warning, empty for none
		wantMin, wantMx int64  // the bounds of the effective maxBytes
	}{
		{name: "default on a 256 MiB volume", size: 256 * mib, warn: "default does not fit", wantMin: 160 * mib, wantMx: 200 * mib},
		{name: "default on a large volume", size: 100 * gib, wantMin: defaultMaxBytes, wantMx: defaultMaxBytes},
		{name: "default on a small volume with other files", size: gib, other: 100 * mib, warn: "default does not fit", wantMin: 700 * mib, wantMx: 760 * mib},
		{name: "default on a large volume full of other files", size: 100 * gib, other: 95 * gib, warn: "leaves too little free space", wantMin: defaultMaxBytes, wantMx: defaultMaxBytes},
		{name: "default on a volume that fits only the minimum", size: 80 * mib, warn: "default does not fit", wantMin: minMaxBytes, wantMx: minMaxBytes},
		{name: "default on a volume too small", size: 70 * mib, err: "the 70 MiB filesystem is too small for the store: it needs at least 72 MiB"},
		{name: "set, larger than the volume", maxBytes: 10 * gib, size: 256 * mib, err: "maxBytes 10.0 GiB does not fit the 256 MiB filesystem (with 80 MiB kept free for writes): set maxBytes to at most"},
		{name: "set, fills the volume", maxBytes: 250 * mib, size: 256 * mib, err: "set maxBytes to at most 245366784 (234 MiB)"},
		{name: "set, little free space left", maxBytes: 192 * mib, size: 256 * mib, warn: "leaves too little free space", wantMin: 192 * mib, wantMx: 192 * mib},
		{name: "set, other files take the space", maxBytes: 512 * mib, size: gib, other: 700 * mib, warn: "leaves too little free space", wantMin: 512 * mib, wantMx: 512 * mib},
		{name: "set, fits", maxBytes: 128 * mib, size: 256 * mib, wantMin: 128 * mib, wantMx: 128 * mib},
		{name: "set, the Helm chart's 16 GiB on 20 GiB (ext4: 18.5 GiB usable)", maxBytes: 16 * gib, size: 18*gib + gib/2, wantMin: 16 * gib, wantMx: 16 * gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &smallVolumeFS{FS: vfs.Default, dir: t.TempDir(), size: tc.size, other: tc.other}
			logs := &logRecorder{}
			p, err := openVolumePebble(t, Config{MaxBytes: tc.maxBytes}, fs, logs)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.NotContains(t, err.Error(), "\n", "one line")
				return
			}
			require.NoError(t, err)
			assert.GreaterOrEqual(t, p.cfg.MaxBytes, tc.wantMin)
			assert.LessOrEqual(t, p.cfg.MaxBytes, tc.wantMx)
			assert.Equal(t, memTableSize(p.cfg.MaxBytes), p.memSize, "the memtable is sized for the effective maxBytes")
			if tc.maxBytes == 0 && p.cfg.MaxBytes > minMaxBytes {
				assert.LessOrEqual(t, spaceNeeded(p.cfg.MaxBytes, true), tc.size, "the default fits with its slack")
			}
			if tc.warn == "" {
				assert.Empty(t, logs.messages())
				return
			}
			require.Len(t, logs.messages(), 1, "one warning")
			assert.Contains(t, logs.messages()[0], "WARN ")
			assert.Contains(t, logs.messages()[0], tc.warn)
		})
	}

	// The value the error suggests opens.
	fs := &smallVolumeFS{FS: vfs.Default, dir: t.TempDir(), size: 256 << 20}
	_, err := openVolumePebble(t, Config{MaxBytes: 10 << 30}, fs, &logRecorder{})
	require.Error(t, err)
	suggested := strings.Fields(err.Error()[strings.Index(err.Error(), "at most ")+len("at most "):])[0]
	n, perr := strconv.ParseInt(suggested, 10, 64)
	require.NoError(t, perr, "a number in %q", err)
	_, err = openVolumePebble(t, Config{MaxBytes: n}, fs, &logRecorder{})
	require.NoError(t, err)
}

// Finding 6 of issue 35: with the default maxBytes, a 256 MiB volume stopped taking writes
// almost at once (the write reserve of 144 MiB, write-ahead logs preallocating 36 MB each). It
// now takes far more than the volume holds, retention deleting the oldest windows.
func TestPebbleSmallVolumeKeepsWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 250 MB")
	}
	ctx := context.Background()
	fs := &smallVolumeFS{FS: vfs.Default, dir: t.TempDir(), size: 256 << 20}
	p, err := openVolumePebble(t, Config{MaxAge: 365 * 24 * time.Hour}, fs, &logRecorder{})
	require.NoError(t, err)
	clock := fakeClock(p, t0)
	res := fillStore(ctx, t, p, clock, fillOptions{events: 120_000, perWindow: 10_000, retainEvery: 1000})
	require.NoError(t, res.stopped, "after %d events", res.events)
	assert.Equal(t, 120_000, res.events)
	du, err := dirUsage(fs.dir)
	require.NoError(t, err)
	t.Logf("maxBytes %d: %d events taken, folder %d bytes", p.cfg.MaxBytes, res.events, du)
	_, err = p.GetTrace(ctx, aggregator.TraceIDFor(ref("c", "", "pods", "ns", "p-1").Key(), t0.Add(11*win)))
	require.NoError(t, err, "the newest window is kept")
}

// Retention runs once per checkInterval; ingest that fills the room left on the disk sooner
// wakes it (here the interval is an hour): writes are refused for moments at most, not until
// the next check.
func TestPebbleLowSpaceWakesRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 MB")
	}
	ctx := context.Background()
	fs := &smallVolumeFS{FS: vfs.Default, dir: t.TempDir(), size: 256 << 20}
	p, err := openVolumePebble(t, Config{MaxAge: 365 * 24 * time.Hour, CheckInterval: time.Hour}, fs, &logRecorder{})
	require.NoError(t, err)
	clock := fakeClock(p, t0)
	require.NoError(t, p.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, p.Stop(ctx)) })
	res := fillStore(ctx, t, p, clock, fillOptions{events: 150_000, perWindow: 10_000, patience: 20 * time.Second})
	require.NoError(t, res.stopped, "after %d events", res.events)
	t.Logf("maxBytes %d: %d events taken, %d refusals retried", p.cfg.MaxBytes, res.events, res.refused)
}

// Pebble preallocates 110% of MemTableSize for every write-ahead log, however little is written
// to it: bounded, a log takes about the space of what it holds.
func TestPebbleWALPreallocationBounded(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil) // the default: 32 MiB memtables
	obj := ref("c", "", "pods", "ns", "p")
	for i := range 20 {
		require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, i*10, 10, 1024)))
		require.NoError(t, p.Sync(ctx))
	}
	logs, err := filepath.Glob(filepath.Join(p.cfg.Dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	for _, name := range logs {
		info, err := os.Stat(name)
		require.NoError(t, err)
		assert.LessOrEqual(t, allocated(info), uint64(info.Size())+maxPreallocate+64<<10,
			"%s: %d bytes allocated for %d written", filepath.Base(name), allocated(info), info.Size())
	}
}

// noFallocateFS is the real filesystem without preallocation (NFS, older ZFS).
type noFallocateFS struct{ vfs.FS }

type noFallocateFile struct{ vfs.File }

func (f noFallocateFile) Preallocate(int64, int64) error { return syscall.EOPNOTSUPP }

func (f *noFallocateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return noFallocateFile{file}, nil
}

func (f *noFallocateFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return noFallocateFile{file}, nil
}

func (f *noFallocateFS) Unwrap() vfs.FS { return f.FS }

// A filesystem without fallocate is no disk fault: Pebble only tries to preallocate its logs.
func TestPebblePreallocateUnsupportedIsNoFault(t *testing.T) {
	ctx := context.Background()
	p := openFaultPebble(t, Config{}, &noFallocateFS{FS: vfs.Default})
	obj := ref("c", "", "pods", "ns", "p")
	for i := range 20 {
		require.NoError(t, p.Export(ctx, windowSpansFrom(obj, t0, i*10, 10, 1024)), "write %d", i)
		require.NoError(t, p.Sync(ctx))
	}
	require.NoError(t, p.Health(ctx))
	got, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), t0))
	require.NoError(t, err)
	assert.Len(t, got, 201)
}

// measureVolumeEnv names a folder on a small filesystem (e.g. a 256 MiB tmpfs) to measure how
// many events the store takes there before writes stop, with the default maxBytes or the one in
// measureMaxBytesEnv:
//
//	mount -t tmpfs -o size=256m tmpfs /mnt/small
//	KELEMETRY_STORE_MEASURE_DIR=/mnt/small/data go test -run TestPebbleMeasureSmallVolume -v ./store/
const (
	measureVolumeEnv   = "KELEMETRY_STORE_MEASURE_DIR"
	measureMaxBytesEnv = "KELEMETRY_STORE_MEASURE_MAXBYTES"
)

func TestPebbleMeasureSmallVolume(t *testing.T) {
	dir := os.Getenv(measureVolumeEnv)
	if dir == "" {
		t.Skip("set " + measureVolumeEnv + " to a folder on a small filesystem")
	}
	ctx := context.Background()
	var maxBytes int64
	if v := os.Getenv(measureMaxBytesEnv); v != "" {
		var err error
		maxBytes, err = strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
	}
	p, err := openPebble(ctx, Config{Dir: dir, MaxAge: 365 * 24 * time.Hour, MaxBytes: maxBytes}, 0,
		telemetry.Settings{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}, vfs.Default)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.close() })
	clock := fakeClock(p, t0)
	start := time.Now()
	var peak atomic.Uint64 // the most the filesystem held, sampled every 2 ms
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if u, err := vfs.Default.GetDiskUsage(dir); err == nil && u.UsedBytes > peak.Load() {
				peak.Store(u.UsedBytes)
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	res := fillStore(ctx, t, p, clock, fillOptions{events: 400_000, perWindow: 20_000, retainEvery: 1000})
	close(done)
	<-sampled
	du, _ := dirUsage(dir)
	t.Logf("maxBytes %d, memtable %d: %d events (%d spans) taken in %s, folder %d bytes, filesystem peak %d bytes; stopped: %v",
		p.cfg.MaxBytes, p.memSize, res.events, res.spans, time.Since(start).Round(time.Second), du, peak.Load(), res.stopped)
	if res.stopped != nil && !errors.Is(res.stopped, query.ErrUnavailable) {
		t.Fatal(res.stopped)
	}
}
