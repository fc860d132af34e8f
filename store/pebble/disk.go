package pebble

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// minMaxBytes is the smallest Config.MaxBytes Validate accepts: below it the write-ahead
// log and the other fixed files take most of the room.
const minMaxBytes = 64 << 20

// Recovery timing: the first retry after a disk fault, the longest pause between retries, how
// long opening the database may take, and how long a write stall may last before Health reports
// it.
const (
	recoverMinDelay  = time.Second
	recoverMaxDelay  = 30 * time.Second
	openTimeout      = 2 * time.Minute
	stallHealthAfter = 10 * time.Second
	probeBytes       = 64 << 10
	probeFileName    = "kelemetry-probe.tmp"
)

// Why the embedded store must guard the disk itself: in the Pebble version used, a failed
// write-ahead-log write or WAL rotation panics inside the commit path (db.go commitWrite and
// rotateWAL), and the rotation panic unlocks a mutex twice, which is a fatal runtime error that
// no recover can catch. A store that let Pebble reach a full disk therefore either crashed the
// process or, with the panic recovered, left the commit pipeline locked for good. So:
//
//   - Writes are refused (store.ErrUnavailable, wrapping ENOSPC) while the filesystem has less free
//     space than writeReserve, before Pebble is called: the write-ahead log never has to grow on
//     a full disk. Retention still runs (its deletions are small) and may use the smaller
//     maintenanceReserve for flushes and compactions.
//   - Every write error of the filesystem under Pebble is recorded (guardFS). From then on the
//     database may hold a broken write-ahead log: no more writes, flushes or compactions reach
//     it. The recovery loop probes the disk with backoff; once a probe write succeeds and space
//     is back, it closes the database (without the flush that would rotate the broken log) and
//     opens it again, replaying the log. Writes acknowledged just before the fault whose log
//     write failed may be lost, as on a power loss.
//   - A panic from Pebble's commit path that still happens (a race with the above) is
//     recovered; the database is then left alone (closing it would block on the locked commit
//     pipeline) and Health reports that a restart is needed.
//   - A store opened on a full disk, or whose database fails to open for a disk error, opens
//     read-only: queries work, writes are refused, and recovery reopens it for writing.

// diskFault is a failed filesystem write under Pebble.
type diskFault struct {
	err error
	at  time.Time
}

// guardFS reports every failed write of the files Pebble creates, and bounds the
// preallocation of the write-ahead log (see maxPreallocate).
type guardFS struct {
	vfs.FS
	onErr func(op, name string, err error)
}

// maxPreallocate bounds one preallocation of a write-ahead log file. Pebble preallocates 110% of
// MemTableSize for every log, even for the small memtables it starts with (256 KiB, doubling up
// to MemTableSize), and keeps up to three live and four recycled logs: with 32 MiB memtables a
// fresh store took 250 MB of a disk for 14 MB of data. The preallocation only saves the
// filesystem some work on the log's first pass; bounded, a log takes the space of what was
// written to it.
const maxPreallocate = 1 << 20

func (g *guardFS) wrap(name string, f vfs.File, err error, op string) (vfs.File, error) {
	if err != nil {
		g.onErr(op, name, err)
		return nil, err
	}
	return &guardFile{File: f, fs: g, name: name}, nil
}

// Create implements vfs.FS.
func (g *guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, c)
	return g.wrap(name, f, err, "create")
}

// ReuseForWrite implements vfs.FS.
func (g *guardFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, c)
	return g.wrap(newname, f, err, "reuse")
}

// OpenReadWrite implements vfs.FS.
func (g *guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err // a missing file is not a disk fault
	}
	return &guardFile{File: f, fs: g, name: name}, nil
}

// Link implements vfs.FS.
func (g *guardFS) Link(oldname, newname string) error {
	err := g.FS.Link(oldname, newname)
	if err != nil {
		g.onErr("link", newname, err)
	}
	return err
}

// Unwrap implements vfs.FS.
func (g *guardFS) Unwrap() vfs.FS { return g.FS }

type guardFile struct {
	vfs.File
	fs   *guardFS
	name string
}

func (f *guardFile) check(op string, err error) error {
	if err != nil {
		f.fs.onErr(op, f.name, err)
	}
	return err
}

func (f *guardFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.check("write", err)
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.check("write", err)
}

func (f *guardFile) Preallocate(off, n int64) error {
	err := f.File.Preallocate(off, min(n, maxPreallocate))
	if errors.Is(err, syscall.EOPNOTSUPP) {
		// A filesystem without fallocate (NFS, older ZFS): Pebble goes on without it, and so
		// does the store; it is no disk fault.
		return err
	}
	return f.check("preallocate", err)
}

func (f *guardFile) Sync() error { return f.check("sync", f.File.Sync()) }

func (f *guardFile) SyncData() error { return f.check("sync", f.File.SyncData()) }

func (f *guardFile) SyncTo(n int64) (bool, error) {
	full, err := f.File.SyncTo(n)
	return full, f.check("sync", err)
}

// noteFault records a failed write under Pebble; the first one since the last recovery is
// logged.
func (p *Store) noteFault(op, name string, err error) {
	f := &diskFault{err: fmt.Errorf("%s %s: %w", op, filepath.Base(name), err), at: time.Now()}
	if p.fault.CompareAndSwap(nil, f) {
		p.logger.Error("store disk write failed: refusing writes until the disk works again", "error", f.err)
	}
}

// memTableSize sizes Pebble's memtable for maxBytes: each write-ahead log file holds up to
// about as much, and up to MemTableStopWritesThreshold live plus one more recycled logs stay on
// disk.
func memTableSize(maxBytes int64) uint64 {
	return uint64(min(max(maxBytes/64, 1<<20), 16<<20))
}

// Free space the store needs: writeReserve for ingest (room to flush the memtables and start a
// new log: 4 memtables; for the manifest and compactions: 2 memtables, within 4-16 MiB),
// maintenanceReserve for retention's flushes and compactions. Both scale with the memtable, so
// with maxBytes: 144 MiB and 68 MiB with the default maxBytes, 8 MiB and 6 MiB with minMaxBytes.
func writeReserve(mem uint64) uint64       { return 4*mem + min(max(2*mem, 4<<20), 16<<20) }
func maintenanceReserve(mem uint64) uint64 { return 2*mem + 4<<20 }

// spaceNeeded is the filesystem space a store bounded by maxBytes needs: maxBytes and the write
// reserve that must stay free beside it; with slack also room for what the folder holds above
// maxBytes for a while: ingest between two retention checks, and the outputs of running
// compactions before their inputs are deleted, which rewrite up to the current window (measured
// on a 256 MiB tmpfs with windows of 42 MB: up to 61 MB above maxBytes; with a quarter of
// maxBytes as slack one run in six hit the full disk). A third of maxBytes, at most 1 GiB.
func spaceNeeded(maxBytes int64, slack bool) uint64 {
	n := uint64(maxBytes) + writeReserve(memTableSize(maxBytes))
	if slack {
		n += min(uint64(maxBytes)/3, 1<<30)
	}
	return n
}

// largestFitting is the largest maxBytes, in whole MiB and at most limit, whose spaceNeeded fits
// in room, or 0 when not even minMaxBytes fits.
func largestFitting(room uint64, limit int64, slack bool) int64 {
	if spaceNeeded(minMaxBytes, slack) > room {
		return 0
	}
	lo, hi := int64(minMaxBytes>>20), max(limit>>20, minMaxBytes>>20) // lo fits
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if spaceNeeded(mid<<20, slack) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return min(lo<<20, max(limit, minMaxBytes))
}

// fitVolume compares MaxBytes with the filesystem of the store's folder, before the database is
// opened. A MaxBytes that cannot fit the filesystem even when the store is alone on it (with the
// write reserve beside it) is an error when it was set; the default is shrunk to fit it, with
// its slack, and one warning says so. A MaxBytes that fits the filesystem but not, with its
// slack, the space the store can reach now (free space plus what it holds already: other files
// take the rest) gets a warning: writes may be refused while the disk is full. The default is
// not shrunk for space other files take: that may be a passing state, and a smaller MaxBytes
// would delete windows for good. An unknown disk usage skips the check.
func (p *Store) fitVolume(explicit bool) error {
	if err := p.baseFS.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	u, err := p.baseFS.GetDiskUsage(p.cfg.Dir)
	if err != nil || u.UsedBytes+u.AvailBytes == 0 {
		p.logger.Debug("store: the filesystem's size is unknown: maxBytes not compared with it", "error", err)
		return nil
	}
	held, err := dirUsage(p.cfg.Dir)
	if err != nil {
		return err
	}
	// Blocks reserved for root (ext4) are neither used nor available: not counted.
	capacity := u.UsedBytes + u.AvailBytes
	room := min(capacity, u.AvailBytes+held)
	maxBytes := p.cfg.MaxBytes
	tooSmall := func() error {
		return fmt.Errorf("the %s filesystem is too small for the store: it needs at least %s (maxBytes %s and %s kept free for writes)",
			sizeString(capacity), sizeString(spaceNeeded(minMaxBytes, false)), sizeString(minMaxBytes), sizeString(writeReserve(memTableSize(minMaxBytes))))
	}
	switch {
	case explicit && spaceNeeded(maxBytes, false) > capacity:
		fit := largestFitting(capacity, maxBytes, false)
		if fit == 0 {
			return tooSmall()
		}
		return fmt.Errorf("maxBytes %s does not fit the %s filesystem (with %s kept free for writes): set maxBytes to at most %d (%s), or leave it unset to size it to the filesystem",
			sizeString(uint64(maxBytes)), sizeString(capacity), sizeString(writeReserve(memTableSize(maxBytes))), fit, sizeString(uint64(fit)))
	case !explicit && spaceNeeded(maxBytes, true) > capacity:
		fit := largestFitting(capacity, maxBytes, true)
		if fit == 0 {
			if spaceNeeded(minMaxBytes, false) > capacity {
				return tooSmall()
			}
			fit = minMaxBytes
		}
		p.logger.Warn("store maxBytes not set and the default does not fit the filesystem: using a smaller maxBytes (set maxBytes to choose)",
			"maxBytes", fit, "defaultMaxBytes", maxBytes, "filesystemBytes", capacity, "freeBytes", u.AvailBytes, "storeBytes", held)
		p.cfg.MaxBytes = fit
	case spaceNeeded(maxBytes, true) > room:
		p.logger.Warn("store maxBytes leaves too little free space on its filesystem: writes may be refused while the disk is full before the store reaches maxBytes",
			"maxBytes", maxBytes, "needBytes", spaceNeeded(maxBytes, true), "filesystemBytes", capacity, "freeBytes", u.AvailBytes, "storeBytes", held,
			"fitsBytes", largestFitting(room, maxBytes, true))
	}
	return nil
}

// sizeString formats n bytes for a message: "256 MiB", "9.8 GiB".
func sizeString(n uint64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 0, 64) + " MiB"
	default:
		return strconv.FormatUint(n, 10) + " bytes"
	}
}

// freeSpace reports why the filesystem has too little free space for need, or nil. An unknown
// amount counts as enough.
func (p *Store) freeSpace(need uint64) error {
	u, err := p.baseFS.GetDiskUsage(p.cfg.Dir)
	if err != nil {
		return nil //nolint:nilerr // an unknown amount counts as enough; write errors still count
	}
	if u.AvailBytes >= need {
		return nil
	}
	return fmt.Errorf("disk full: %d bytes free in %s, %d needed: %w", u.AvailBytes, p.cfg.Dir, need, syscall.ENOSPC)
}

// writable reports why writes are refused, or nil; call with mu held. maintenance applies the
// smaller reserve of retention.
func (p *Store) writable(maintenance bool) error {
	if err := p.usable(); err != nil {
		return err
	}
	return p.diskState(maintenance)
}

// diskState is writable without the checks of usable; call with mu held.
func (p *Store) diskState(maintenance bool) error {
	if msg := p.wedged.Load(); msg != nil {
		return fmt.Errorf("%w: Pebble's commit path panicked (%s); restart the process", query.ErrUnavailable, *msg)
	}
	if p.readOnly != "" {
		return fmt.Errorf("%w: read-only: %s", query.ErrUnavailable, p.readOnly)
	}
	if f := p.fault.Load(); f != nil {
		return fmt.Errorf("%w: disk write failed %s ago: %w", query.ErrUnavailable, time.Since(f.at).Round(time.Second), f.err)
	}
	var err error
	if maintenance {
		err = p.freeSpace(maintenanceReserve(p.memSize))
	} else {
		err = p.writeSpace()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", query.ErrUnavailable, err)
	}
	return nil
}

// spaceRecheck is how long a free-space check of the write path stays valid (a statfs costs a
// few microseconds, a sixth of a small write).
const spaceRecheck = 100 * time.Millisecond

// writeSpace is freeSpace(writeReserve) for the write path: a check that found room stays valid
// for spaceRecheck, and only until the store wrote half of the room above the reserve. Once the
// room above the reserve is less than the overshoot allowed between two checks (1/16 of
// MaxBytes), it wakes the retention loop, which deletes windows if the store is over MaxBytes.
func (p *Store) writeSpace() error {
	now := time.Now().UnixNano()
	if now-p.spaceAt.Load() < int64(spaceRecheck) && p.spaceBudget.Load() > 0 {
		return nil
	}
	need := writeReserve(p.memSize)
	u, err := p.baseFS.GetDiskUsage(p.cfg.Dir)
	if err != nil {
		return nil //nolint:nilerr // an unknown amount counts as enough; write errors still count
	}
	if u.AvailBytes < need+uint64(p.cfg.MaxBytes)/16 {
		p.wakeRetention()
	}
	if u.AvailBytes < need {
		p.spaceAt.Store(0)
		return fmt.Errorf("disk full: %d bytes free in %s, %d needed: %w", u.AvailBytes, p.cfg.Dir, need, syscall.ENOSPC)
	}
	p.spaceBudget.Store(int64(min((u.AvailBytes-need)/2, math.MaxInt64)))
	p.spaceAt.Store(now)
	return nil
}

// Sync writes and syncs the write-ahead log up to now (aggregator.Syncer): an Export returns
// once its batch is queued for the log, and a process crash can lose what the log writer had not
// written yet. The durable audit queue calls it before it marks batches handled.
func (p *Store) Sync(context.Context) error {
	p.mu.RLock() // held through LogData: a reopening or close replaces p.db
	defer p.mu.RUnlock()
	err := p.usable()
	if err == nil {
		err = p.commitPendingNow()
	}
	if err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	if err := p.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("sync store log: %w", err)
	}
	return nil
}

// Health reports why the store cannot take writes now (disk full, disk errors, read-only, a
// long write stall, a fatal Pebble error), or nil. It is cheap enough for every health check.
func (p *Store) Health(context.Context) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.writable(false); err != nil {
		return fmt.Errorf("store %s: %w", p.cfg.Dir, err)
	}
	p.pending.mu.Lock()
	failed := p.pending.failed
	if failed != nil { // try again: the disk may be back
		if p.commitPending() == nil {
			failed = nil
		}
	}
	p.pending.mu.Unlock()
	if failed != nil {
		return fmt.Errorf("store %s: %w: committing the pending spans failed: %w", p.cfg.Dir, query.ErrUnavailable, failed)
	}
	if since := p.stallSince.Load(); since != 0 {
		if d := time.Since(time.Unix(0, since)); d > stallHealthAfter {
			return fmt.Errorf("store %s: %w: writes stalled for %s (flushes or compactions are not keeping up)",
				p.cfg.Dir, query.ErrUnavailable, d.Round(time.Second))
		}
	}
	return nil
}

// apply commits b. A panic of Pebble's commit path (a failed log write) is recovered: the
// database is then left alone for good (see wedged).
func (p *Store) apply(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprint(r)
			if p.wedged.CompareAndSwap(nil, &msg) {
				p.logger.Error("Pebble panicked while committing: the store refuses writes until the process restarts", "panic", msg)
			}
			err = fmt.Errorf("%w: Pebble panicked: %s", query.ErrUnavailable, msg)
		}
	}()
	if err := p.db.Apply(b, pebble.NoSync); err != nil {
		return err
	}
	// Pebble's commit path logs a failed commit as fatal and carries on as if it worked.
	if msg := p.failed.Load(); msg != nil {
		return fmt.Errorf("pebble failed: %s", *msg)
	}
	return nil
}

// probe writes, syncs and removes a small file next to the database, through the filesystem
// under Pebble's.
func (p *Store) probe() error {
	name := p.baseFS.PathJoin(p.cfg.Dir, probeFileName)
	f, err := p.baseFS.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	buf := make([]byte, probeBytes)
	_, werr := f.Write(buf)
	serr := f.Sync()
	cerr := f.Close()
	rerr := p.baseFS.Remove(name)
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("probe: remove: %w", rerr)
	}
	return nil
}

// needsRecovery says whether the database waits for a reopen.
func (p *Store) needsRecovery() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return !p.closed && p.failed.Load() == nil && p.wedged.Load() == nil &&
		(p.db == nil || p.readOnly != "" || p.fault.Load() != nil)
}

// recoverStep reopens the database for writing when it waits for it and the disk works again
// (space and a probe write). It reports false while it still waits (the loop then backs off),
// true otherwise; a database whose commit path panicked is never reopened.
func (p *Store) recoverStep(ctx context.Context) bool {
	if !p.needsRecovery() {
		return true
	}
	if err := p.freeSpace(maintenanceReserve(p.memSize)); err != nil {
		p.logger.Debug("store still waiting for disk space", "error", err)
		return false
	}
	if err := p.probe(); err != nil {
		p.logger.Debug("store disk still failing", "error", err)
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || (p.db != nil && p.readOnly == "" && p.fault.Load() == nil) {
		return true
	}
	if err := p.closeDB(false); err != nil {
		p.logger.Warn("store: closing the failed database", "error", err)
	}
	p.db = nil
	p.index.Purge() // index entries acknowledged just before the fault may be lost
	p.fault.Store(nil)
	p.readOnly = ""
	if err := p.openDB(ctx); err != nil {
		p.logger.Error("store: reopening the database failed", "error", err)
		return false
	}
	if p.readOnly != "" {
		return false
	}
	// A store first opened read-only was not marked with the schema version it is now written in.
	if err := p.checkVersion(); err != nil {
		p.logger.Error("store: marking the schema version after the reopening failed", "error", err)
		_ = p.closeDB(false)
		p.db = nil
		return false
	}
	p.logger.Info("store recovered: the disk works again, writes resume")
	return true
}

// recoverLoop runs recoverStep with backoff while the database waits for a reopen.
func (p *Store) recoverLoop(ctx context.Context) {
	delay := recoverMinDelay
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if p.recoverStep(ctx) {
			delay = recoverMinDelay
		} else {
			delay = min(2*delay, recoverMaxDelay)
		}
		timer.Reset(delay)
	}
}

// openDB opens the database in cfg.Dir into p.db: for writing when the disk has room and the
// open works, read-only otherwise (p.readOnly says why). Call with mu held or before p is shared.
// Opening is bounded by ctx and openTimeout.
func (p *Store) openDB(ctx context.Context) error {
	if err := p.baseFS.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	// Pebble retries a failing write at open forever: test the disk first.
	err := p.freeSpace(maintenanceReserve(p.memSize))
	if err == nil {
		err = p.probe()
	}
	if err != nil {
		db, rerr := p.openBounded(ctx, true)
		if rerr != nil {
			return fmt.Errorf("%w; read-only open: %w", err, rerr)
		}
		p.db, p.readOnly = db, err.Error()
		p.logger.Error("store opened read-only: the disk is full or failing; writes resume when it works", "reason", err)
		return nil
	}
	db, err := p.openBounded(ctx, false)
	if err == nil {
		p.db = db
		return nil
	}
	f := p.fault.Load()
	if f == nil && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.EDQUOT) {
		return err
	}
	p.fault.Store(nil)
	db, rerr := p.openBounded(ctx, true)
	if rerr != nil {
		return fmt.Errorf("%w; read-only open: %w", err, rerr)
	}
	p.db, p.readOnly = db, err.Error()
	p.logger.Error("store opened read-only: the disk failed while opening; writes resume when it works", "error", err)
	return nil
}

// openBounded runs pebble.Open until ctx or openTimeout ends. A database that opens after the
// deadline is closed in the background.
func (p *Store) openBounded(ctx context.Context, readOnly bool) (*pebble.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	type result struct {
		db  *pebble.DB
		err error
	}
	res := make(chan result, 1)
	cache := pebble.NewCache(p.cfg.CacheSize)
	opts := p.options(readOnly, cache)
	go func() {
		db, err := pebble.Open(p.cfg.Dir, opts)
		cache.Unref()
		res <- result{db, err}
	}()
	select {
	case r := <-res:
		return r.db, r.err
	case <-ctx.Done():
		go func() {
			if r := <-res; r.db != nil {
				_ = r.db.Close()
			}
		}()
		return nil, fmt.Errorf("opening the database did not finish in time: %w", ctx.Err())
	}
}

// closeDB closes p.db: with flush (when the disk allows), the memtable is written out first. A
// database whose commit path panicked is left open: closing it would block for good. Call with
// mu held.
func (p *Store) closeDB(flush bool) error {
	if p.db == nil {
		return nil
	}
	if p.wedged.Load() != nil {
		p.logger.Error("store: leaving the database open: Pebble's commit path is stuck after a panic")
		return nil
	}
	var errs []error
	if flush && p.failed.Load() == nil && p.diskState(true) == nil {
		if err := p.db.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		}
	}
	if err := p.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close: %w", err))
	}
	return errors.Join(errs...)
}

// Stop implements store.Store: it stops retention and recovery and closes the store (see close),
// within ctx: on a failing disk a close may hang, and then Stop returns ctx's error while the
// close goes on in the background. Later calls return nil.
func (p *Store) Stop(ctx context.Context) error {
	stopErr := p.stopRetention(ctx)
	done := make(chan error, 1)
	go func() { done <- p.close() }()
	select {
	case err := <-done:
		return errors.Join(stopErr, err)
	case <-ctx.Done():
		return errors.Join(stopErr, fmt.Errorf("close store %s: %w (the disk may be failing; still closing)", p.cfg.Dir, ctx.Err()))
	}
}

// dirUsage is the disk space the files under dir take, as du counts it (allocated blocks where
// the system says, sizes otherwise).
func dirUsage(dir string) (uint64, error) {
	var total uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // a file removed meanwhile takes no space
		}
		total += allocated(info)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return total, nil
}
