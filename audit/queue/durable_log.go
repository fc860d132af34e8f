package queue

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The durable queue's log is a folder of append-only segment files, <number>.seg, written in
// order. Each record is
//
//	length uint32 | crc32c uint32 | type byte | batch ID uint64 | body
//
// where length counts everything after the crc, and the crc covers the same bytes. A batch record
// (type 1) holds a batch of events (see appendBatch); an ack record (type 2, no body) says that
// every event of the batch with that ID was handled. A writer fsyncs batch records before
// acknowledging them and writes ack records without waiting (a lost ack only replays a handled
// batch, which is harmless: event span IDs are deterministic and the stores upsert). Segments
// are deleted oldest first once every batch in them is acknowledged; an active segment whose
// batches are all acknowledged is closed and deleted once it holds handledRotateBytes, so handled
// data does not linger on disk. No fsync and no deletion happens while the log's lock is held: a
// slow disk delays the batches that wait for their own fsync, not the writes of the others (a
// new segment's directory entry is synced with its first fsync, a rotated segment's tail by the
// batches in it, and handled segments are deleted by the acknowledging goroutine after it lets
// the lock go). Batches are synced with fdatasync where there is one (their bytes and the file's
// size, not its times). After a crash the tail of the last segment may hold a torn record:
// reading a segment stops at the first record that is short or fails its crc, and a reopened log
// always writes into a new segment.
//
// A failed write or fsync (a full disk, a quota, EIO) is an operating state, not the end: the log
// refuses batches with ErrUnavailable and, at most once a probeInterval, abandons the failed
// segment (what it holds that was synced stays readable; what was not synced is never acknowledged)
// and probes a new one with a synced record. Once that succeeds the log takes batches again.
//
// One process writes a folder: openDiskLog takes an exclusive lock on its lock file (see
// lockDir) and refuses a folder another process holds.

const (
	recBatch byte = 1
	recAck   byte = 2

	// recHeader is the bytes before a record's body: length, crc, type, ID.
	recHeader = 4 + 4 + 1 + 8
	// maxRecord bounds a record's length when reading, so that a corrupt length cannot make the
	// reader allocate without limit.
	maxRecord = 1 << 30

	segSuffix = ".seg"

	// probeInterval is how often a failed log tries a new segment.
	probeInterval = time.Second
	// handledRotateBytes is the size from which an active segment whose batches are all
	// acknowledged is replaced by a new one, so that it can be deleted.
	handledRotateBytes = 1 << 20
	// checkFreeBytes is the batch size from which a write first checks the free space, which
	// must exceed the batch by freeMargin.
	checkFreeBytes = 1 << 20
	freeMargin     = 1 << 20
)

// segFile is what the log needs of a segment file: an *os.File (tests inject faults).
type segFile interface {
	io.Writer
	Sync() error
	Close() error
}

func createSegFile(path string) (segFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return dataSyncFile{f}, nil
}

// dataSyncFile is a segment file whose Sync writes its data and size, not its times (syncData):
// a batch is on disk once its bytes and the file's length are.
type dataSyncFile struct{ *os.File }

func (f dataSyncFile) Sync() error { return syncData(f.File) }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type logSegment struct {
	num  uint64
	path string
	f    segFile // open for appending while active, for syncing until deleted; nil if read at open
	size int64   // bytes written whole (a failed write's torn part is not counted)
	// synced is the bytes of the segment known to be on disk (or no longer needed).
	synced int64
	// dirSynced says the segment's directory entry is on disk: syncTo syncs the folder with the
	// segment's first fsync.
	dirSynced bool
	// abandoned marks a segment given up after a failed write or sync: its records beyond synced
	// are never synced, and no more are written to it.
	abandoned bool
	// pending counts its batches not yet acknowledged.
	pending int
}

// batchLoc is where a batch record waiting for replay lies.
type batchLoc struct {
	id     uint64
	path   string
	offset int64
	length int // of the whole record
}

// diskLog is the append-only log of the durable queue.
type diskLog struct {
	dir          string
	maxBytes     int64
	segmentBytes int64
	logger       *slog.Logger

	create func(path string) (segFile, error)
	remove func(path string) error // os.Remove (tests delay it)
	lock   io.Closer               // the folder's lock, released by Close

	mu       sync.Mutex
	segs     []*logSegment // oldest first; the last is active
	size     int64         // bytes of all segments
	nextID   uint64
	batchSeg map[uint64]*logSegment // unacknowledged batches
	// doomed are handled segments taken off segs, oldest first, whose files removeDoomed deletes
	// without holding mu (their bytes stay counted in size until then).
	doomed []*logSegment
	closed bool
	// failed is the last write or sync error while the log refuses batches (nil when it takes
	// them); failedAt is when it failed or was last probed.
	failed   error
	failedAt time.Time

	syncMu   sync.Mutex // one fsync of the active segment at a time; others wait and share it
	removeMu sync.Mutex // one removeDoomed at a time, so that segments go oldest first
	// removeWarned is the last file whose deletion failed and was logged (removeMu).
	removeWarned string

	syncs          atomic.Int64 // fsyncs of appends (for tests and metrics)
	deletedSegs    atomic.Int64
	corruptRecords atomic.Int64
	failures       atomic.Int64 // writes or syncs that failed
	recoveries     atomic.Int64 // probes that brought a failed log back

	// onSync, when set (before the log is shared), is told how long each fsync of appends took.
	onSync func(time.Duration)
}

// openDiskLog opens (creating it if needed) the log in dir and returns the batches that were
// written and not acknowledged, oldest first.
func openDiskLog(dir string, maxBytes, segmentBytes int64, logger *slog.Logger) (*diskLog, []batchLoc, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("audit queue dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		_ = lock.Close()
		return nil, nil, fmt.Errorf("audit queue dir: %w", err)
	}
	l := &diskLog{dir: dir, maxBytes: maxBytes, segmentBytes: segmentBytes, logger: logger,
		create: createSegFile, remove: os.Remove, lock: lock, batchSeg: map[uint64]*logSegment{}, nextID: 1}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		num, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		l.segs = append(l.segs, &logSegment{num: num, path: filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(l.segs, func(a, b *logSegment) int { return cmp.Compare(a.num, b.num) })

	var batches []batchLoc
	acked := map[uint64]bool{}
	for _, s := range l.segs {
		bs, acks, size, err := l.scan(s.path)
		if err != nil {
			_ = lock.Close()
			return nil, nil, err
		}
		s.size, s.synced = size, size
		l.size += size
		batches = append(batches, bs...)
		for _, id := range acks {
			acked[id] = true
		}
	}
	segOf := map[string]*logSegment{}
	for _, s := range l.segs {
		segOf[s.path] = s
	}
	var pending []batchLoc
	for _, b := range batches {
		l.nextID = max(l.nextID, b.id+1)
		if acked[b.id] {
			continue
		}
		s := segOf[b.path]
		s.pending++
		l.batchSeg[b.id] = s
		pending = append(pending, b)
	}
	for id := range acked {
		l.nextID = max(l.nextID, id+1)
	}
	next := uint64(1)
	if n := len(l.segs); n > 0 {
		next = l.segs[n-1].num + 1
	}
	if err := l.newSegment(next); err != nil {
		l.closeFiles()
		_ = lock.Close()
		return nil, nil, err
	}
	l.collect()
	l.removeDoomed()
	return l, pending, nil
}

// scan reads a segment's records. It stops at the first torn or corrupt record (counted).
func (l *diskLog) scan(path string) (batches []batchLoc, acks []uint64, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("audit queue segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("audit queue segment: %w", err)
	}
	br := bufio.NewReaderSize(f, 256<<10)
	var off int64
	var hdr [recHeader]byte
	var body []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if !errors.Is(err, io.EOF) {
				l.corrupt(path, off, "torn header")
			}
			break
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n < recHeader-8 || n > maxRecord {
			l.corrupt(path, off, "bad length")
			break
		}
		bodyLen := int(n) - (recHeader - 8)
		if cap(body) < bodyLen {
			body = make([]byte, bodyLen)
		}
		body = body[:bodyLen]
		if _, err := io.ReadFull(br, body); err != nil {
			l.corrupt(path, off, "torn record")
			break
		}
		crc := crc32.Update(crc32.Checksum(hdr[8:], crcTable), crcTable, body)
		if crc != binary.LittleEndian.Uint32(hdr[4:8]) {
			l.corrupt(path, off, "checksum mismatch")
			break
		}
		id := binary.LittleEndian.Uint64(hdr[9:17])
		switch hdr[8] {
		case recBatch:
			batches = append(batches, batchLoc{id: id, path: path, offset: off, length: recHeader + bodyLen})
		case recAck:
			acks = append(acks, id)
		}
		off += int64(recHeader + bodyLen)
	}
	return batches, acks, st.Size(), nil
}

func (l *diskLog) corrupt(path string, off int64, what string) {
	l.corruptRecords.Add(1)
	l.logger.Warn("audit queue segment ends in a torn or corrupt record; the rest of the segment is skipped",
		"path", path, "offset", off, "problem", what)
}

// readBatch reads the body of a batch record found at open.
func readBatch(loc batchLoc) ([]byte, error) {
	f, err := os.Open(loc.path)
	if err != nil {
		return nil, fmt.Errorf("audit queue segment: %w", err)
	}
	defer f.Close()
	buf := make([]byte, loc.length)
	if _, err := f.ReadAt(buf, loc.offset); err != nil {
		return nil, fmt.Errorf("audit queue segment %s at %d: %w", loc.path, loc.offset, err)
	}
	return buf[recHeader:], nil
}

// newSegment creates segment num and makes it the active one. Its directory entry is synced by
// the first syncTo of a batch in it. l.mu is held (or l is not shared).
func (l *diskLog) newSegment(num uint64) error {
	path := filepath.Join(l.dir, fmt.Sprintf("%020d%s", num, segSuffix))
	f, err := l.create(path)
	if err != nil {
		return fmt.Errorf("audit queue segment: %w", err)
	}
	l.segs = append(l.segs, &logSegment{num: num, path: path, f: f})
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit queue dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync audit queue dir: %w", err)
	}
	return nil
}

func (l *diskLog) active() *logSegment { return l.segs[len(l.segs)-1] }

// batchBuffer returns a buffer to pass to appendBatch and then Append: it starts with room for the
// record header.
func batchBuffer(sizeHint int) []byte {
	b := make([]byte, recHeader, recHeader+sizeHint)
	return b
}

// Append writes rec (a batchBuffer with the body appended) as a batch record and returns its ID
// once it is on disk. Appends that wait for an fsync at the same time share it. When the log
// holds maxBytes it returns an error wrapping ErrFull; while it has failed, one wrapping
// ErrUnavailable.
func (l *diskLog) Append(rec []byte) (uint64, error) {
	id, seg, end, err := l.write(rec)
	if err != nil {
		return 0, err
	}
	if err := l.syncTo(seg, end); err != nil {
		return 0, err
	}
	return id, nil
}

// write is Append without waiting for the disk: it returns the batch's ID and the segment and
// offset to pass to syncTo.
func (l *diskLog) write(rec []byte) (id uint64, seg *logSegment, end int64, err error) {
	size := int64(len(rec))
	if len(rec)-8 > maxRecord {
		return 0, nil, 0, fmt.Errorf("%w (%w): a batch of %d bytes is over the record limit", ErrBatchTooLarge, ErrFull, len(rec))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return 0, nil, 0, ErrStopped
	case size > l.maxBytes:
		return 0, nil, 0, fmt.Errorf("%w (%w): a batch of %d bytes on disk can never fit audit.queue.maxDiskBytes %d",
			ErrBatchTooLarge, ErrFull, size, l.maxBytes)
	}
	if err := l.usable(time.Now()); err != nil {
		return 0, nil, 0, err
	}
	if l.size+size > l.maxBytes {
		return 0, nil, 0, fmt.Errorf("%w: %d of %d bytes on disk taken, batch of %d bytes", ErrFull, l.size, l.maxBytes, size)
	}
	if size >= checkFreeBytes {
		// A large batch that cannot fit the volume is refused before it is written, so that it
		// neither fails the log nor leaves a torn record taking the room.
		if free, ok := freeBytes(l.dir); ok && free < uint64(size)+freeMargin {
			return 0, nil, 0, fmt.Errorf("%w: disk full: %d bytes free in %s, a batch of %d bytes needs %d more: %w",
				ErrUnavailable, free, l.dir, size, freeMargin, syscall.ENOSPC)
		}
	}
	if a := l.active(); a.size > 0 && a.size+size > l.segmentBytes {
		if err := l.rotate(); err != nil {
			return 0, nil, 0, l.fail(err)
		}
	}
	id = l.nextID
	l.nextID++
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(rec)-8)) // bounded by maxRecord above
	rec[8] = recBatch
	binary.LittleEndian.PutUint64(rec[9:17], id)
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(rec[8:], crcTable))
	a := l.active()
	if _, err := a.f.Write(rec); err != nil {
		// Part of the record may be in the file: write no more there (a restart skips the torn
		// tail), and probe a new segment later.
		return 0, nil, 0, l.fail(fmt.Errorf("write audit queue segment: %w", err))
	}
	a.size += size
	l.size += size
	a.pending++
	l.batchSeg[id] = a
	return id, a, a.size, nil
}

// fail puts the log in the failed state for err and returns the error to answer with. l.mu is
// held.
func (l *diskLog) fail(err error) error {
	l.failures.Add(1)
	if l.failed == nil {
		l.logger.Error("audit queue: writing the log failed; batches are refused (503) until a probe write succeeds", "error", err)
	}
	l.failed, l.failedAt = err, time.Now()
	return l.failedErr()
}

// failedErr is the error batches get while the log has failed. l.mu is held.
func (l *diskLog) failedErr() error {
	return fmt.Errorf("%w: the audit queue's log in %s failed %s ago (%w); retrying every %s",
		ErrUnavailable, l.dir, time.Since(l.failedAt).Round(time.Second), l.failed, probeInterval)
}

// usable returns nil when the log takes batches. A failed log probes a new segment when
// probeInterval passed since the failure or the last probe. l.mu is held.
func (l *diskLog) usable(now time.Time) error {
	if l.failed == nil {
		return nil
	}
	if now.Sub(l.failedAt) >= probeInterval {
		if err := l.probe(); err != nil {
			l.failed, l.failedAt = err, now
			l.failures.Add(1)
		} else {
			l.logger.Info("audit queue: a probe write succeeded; the log takes batches again",
				"failedFor", now.Sub(l.failedAt).Round(time.Millisecond).String())
			l.failed = nil
			l.recoveries.Add(1)
			return nil
		}
	}
	return l.failedErr()
}

// probe abandons the failed active segment and starts a new one with a synced record (an ack of
// no batch). l.mu is held.
func (l *diskLog) probe() error {
	a := l.active()
	if a.f != nil { // also when a failed sync abandoned it: no more is written there
		_ = a.f.Close()
		a.f = nil
	}
	if !a.abandoned {
		a.abandoned = true
		if a.size == 0 && a.pending == 0 && len(l.segs) > 1 {
			// Nothing was written whole to it: it need not stay.
			_ = os.Remove(a.path)
			l.segs = l.segs[:len(l.segs)-1]
		}
	}
	if err := l.newSegment(a.num + 1); err != nil {
		return err
	}
	n := l.active()
	rec := appendAck(nil, 0)
	if _, err := n.f.Write(rec); err != nil {
		return fmt.Errorf("probe audit queue segment: %w", err)
	}
	n.size += int64(len(rec))
	l.size += int64(len(rec))
	if err := n.f.Sync(); err != nil {
		return fmt.Errorf("probe audit queue segment: sync: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		return fmt.Errorf("probe audit queue segment: %w", err)
	}
	n.synced, n.dirSynced = n.size, true
	return nil
}

// Health returns nil while the log takes batches, else an error wrapping ErrUnavailable that
// says why. A failed log probes a new segment here too (at most once a probeInterval), so it
// recovers by itself while nothing is posted.
func (l *diskLog) Health() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrStopped
	}
	return l.usable(time.Now())
}

// syncTo returns once seg is on disk up to end. One caller fsyncs everything written to the
// active segment so far while the others wait for it, then find their records synced (group
// commit).
func (l *diskLog) syncTo(seg *logSegment, end int64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.syncedTo(seg, end); err != nil || seg.synced >= end {
		l.mu.Unlock()
		return err
	}
	upTo, f, dirSynced := seg.size, seg.f, seg.dirSynced
	l.mu.Unlock()
	l.syncs.Add(1)
	// The file first: on file systems with a journal its fsync commits the file's creation
	// too, and the folder's fsync after it finds little left to write.
	began := time.Now()
	err := f.Sync()
	if err == nil && !dirSynced {
		err = syncDir(l.dir)
	}
	if l.onSync != nil {
		l.onSync(time.Since(began))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if seg.synced >= end || seg.abandoned {
			// Handled meanwhile (its content no longer needed), or given up by a probe:
			// syncedTo says which.
			return l.syncedTo(seg, end)
		}
		// What the failed fsync covered may never reach the disk, and a later fsync of the
		// file would not say so (the kernel reports a writeback error once): no batch in the
		// segment beyond what was synced is acknowledged, whichever segment is active.
		seg.abandoned = true
		return l.fail(fmt.Errorf("sync audit queue segment: %w", err))
	}
	seg.synced = max(seg.synced, upTo)
	seg.dirSynced = true
	return nil
}

// syncedTo returns nil if seg is on disk up to end or may still get there, else why it never
// will. l.mu is held.
func (l *diskLog) syncedTo(seg *logSegment, end int64) error {
	switch {
	case seg.synced >= end:
		return nil
	case seg.abandoned:
		return fmt.Errorf("%w: a write or sync of the audit queue's log in %s failed before this batch was on disk", ErrUnavailable, l.dir)
	case l.failed != nil:
		return l.failedErr()
	case l.closed:
		return ErrStopped
	}
	return nil
}

// rotate starts a new segment. The batches written to the one before it sync it themselves
// (syncTo), outside the lock; the acks at its end need no sync (a lost ack only replays a handled
// batch). l.mu is held.
func (l *diskLog) rotate() error {
	if err := l.newSegment(l.active().num + 1); err != nil {
		return err
	}
	l.collect()
	return nil
}

// Ack records that every event of each batch of ids was handled, with one write for all of
// their records. It does not wait for the disk. Acking an unknown batch, or after Close, does
// nothing. While the log has failed the records are not written (the batches would only be
// replayed after a restart).
func (l *diskLog) Ack(ids ...uint64) {
	if l.ack(ids) {
		l.removeDoomed()
	}
}

// ack is Ack under l.mu; it reports whether segments wait for removeDoomed.
func (l *diskLog) ack(ids []uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	var one [recHeader]byte
	recs := one[:0]
	if len(ids) > 1 {
		recs = make([]byte, 0, recHeader*len(ids))
	}
	collect := false
	for _, id := range ids {
		s, ok := l.batchSeg[id]
		if !ok {
			continue
		}
		delete(l.batchSeg, id)
		s.pending--
		collect = collect || s.pending == 0
		recs = appendAck(recs, id)
	}
	if len(recs) > 0 && l.failed == nil {
		a := l.active()
		if _, err := a.f.Write(recs); err != nil {
			_ = l.fail(fmt.Errorf("write audit queue segment: %w", err))
		} else {
			n := int64(len(recs))
			a.size += n
			l.size += n
		}
	}
	if !collect {
		return len(l.doomed) > 0
	}
	if a := l.active(); a.pending == 0 && a.size >= min(handledRotateBytes, l.segmentBytes) && l.failed == nil {
		// Everything in the active segment is handled: start a new one so that it can go. Its
		// content is no longer needed, so it needs no fsync: a sync waiting on it is done.
		a.synced = a.size
		if err := l.newSegment(a.num + 1); err != nil {
			l.logger.Warn("audit queue: start a new log segment", "error", err)
		}
	}
	l.collect()
	return len(l.doomed) > 0
}

// appendAck appends the ack record of batch id to b.
func appendAck(b []byte, id uint64) []byte {
	var rec [recHeader]byte
	binary.LittleEndian.PutUint32(rec[0:4], recHeader-8)
	rec[8] = recAck
	binary.LittleEndian.PutUint64(rec[9:17], id)
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(rec[8:], crcTable))
	return append(b, rec[:]...)
}

// collect gives up the oldest segments while every batch in them is acknowledged (never the
// active one), for removeDoomed to delete. Deleting only from the front keeps the ack records of
// the batches still kept. l.mu is held.
func (l *diskLog) collect() {
	for len(l.segs) > 1 && l.segs[0].pending == 0 {
		s := l.segs[0]
		s.synced = s.size // nothing in it is needed any more: a sync waiting on it is done
		l.doomed = append(l.doomed, s)
		l.segs[0] = nil
		l.segs = l.segs[1:]
	}
}

// removeDoomed closes and deletes the files of the segments collect gave up, oldest first,
// without holding l.mu while the file system works (deleting a large file can take a while on a
// busy disk, and closing one on a network file system writes it out). A file that cannot be
// deleted stays doomed, and so do those after it: the next call tries again.
func (l *diskLog) removeDoomed() {
	l.removeMu.Lock()
	defer l.removeMu.Unlock()
	l.mu.Lock()
	doomed := l.doomed
	l.doomed = nil
	l.mu.Unlock()
	for i, s := range doomed {
		if s.f != nil { // only removeDoomed touches a doomed segment's f
			_ = s.f.Close()
			s.f = nil
		}
		if err := l.remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			if s.path != l.removeWarned { // once per file, not at every ack while it fails
				l.removeWarned = s.path
				l.logger.Warn("delete handled audit queue segment (tried again later)", "path", s.path, "error", err)
			}
			l.mu.Lock()
			l.doomed = append(doomed[i:len(doomed):len(doomed)], l.doomed...)
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		l.size -= s.size
		l.mu.Unlock()
		l.deletedSegs.Add(1)
	}
}

// Size returns the bytes of the log's segment files.
func (l *diskLog) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Close syncs the segments still open (so that the batches and acks written reach the disk),
// closes the files, deletes the handled ones and releases the folder's lock. Appends and acks
// afterwards are refused or ignored. It may be called more than once.
func (l *diskLog) Close() error {
	// syncMu first, as syncTo takes them: no fsync of a batch runs while Close syncs.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var err error
	if l.failed == nil {
		var synced []*logSegment
		dirSynced := true
		for _, s := range l.segs {
			if s.f == nil || s.abandoned {
				continue
			}
			if serr := s.f.Sync(); serr != nil {
				err = errors.Join(err, fmt.Errorf("sync audit queue segment: %w", serr))
				continue
			}
			synced = append(synced, s)
			dirSynced = dirSynced && s.dirSynced
		}
		if !dirSynced {
			if serr := syncDir(l.dir); serr != nil {
				err = errors.Join(err, serr)
				synced = nil // their folder entries may not be on disk
			}
		}
		for _, s := range synced {
			s.synced, s.dirSynced = s.size, true
		}
	}
	l.closeFiles()
	l.mu.Unlock()
	l.removeDoomed()
	if lerr := l.lock.Close(); lerr != nil {
		err = errors.Join(err, fmt.Errorf("unlock audit queue dir: %w", lerr))
	}
	return err
}

func (l *diskLog) closeFiles() {
	for _, s := range l.segs {
		if s.f != nil {
			_ = s.f.Close()
			s.f = nil
		}
	}
}
