package audit

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
// are deleted oldest first once every batch in them is acknowledged. After a crash the tail of
// the last segment may hold a torn record: reading a segment stops at the first record that is
// short or fails its crc, and a reopened log always writes into a new segment.

const (
	recBatch byte = 1
	recAck   byte = 2

	// recHeader is the bytes before a record's body: length, crc, type, ID.
	recHeader = 4 + 4 + 1 + 8
	// maxRecord bounds a record's length when reading, so that a corrupt length cannot make the
	// reader allocate without limit.
	maxRecord = 1 << 30

	segSuffix = ".seg"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type logSegment struct {
	num  uint64
	path string
	f    *os.File // open for appending while active, for syncing until deleted; nil if read at open
	size int64
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

	mu          sync.Mutex
	segs        []*logSegment // oldest first; the last is active
	size        int64         // bytes of all segments
	written     uint64        // bytes written by this process, a position that only grows
	rotatedUpTo uint64        // written when the last segment was rotated out (synced then)
	nextID      uint64
	batchSeg    map[uint64]*logSegment // unacknowledged batches
	closed      bool
	failed      error // a write or sync error: the log takes no more batches

	syncMu sync.Mutex
	synced uint64 // written up to here is on disk

	syncs          atomic.Int64 // fsyncs of appends (for tests and metrics)
	deletedSegs    atomic.Int64
	corruptRecords atomic.Int64
}

// openDiskLog opens (creating it if needed) the log in dir and returns the batches that were
// written and not acknowledged, oldest first.
func openDiskLog(dir string, maxBytes, segmentBytes int64, logger *slog.Logger) (*diskLog, []batchLoc, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, nil, fmt.Errorf("audit queue dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("audit queue dir: %w", err)
	}
	l := &diskLog{dir: dir, maxBytes: maxBytes, segmentBytes: segmentBytes, logger: logger,
		batchSeg: map[uint64]*logSegment{}, nextID: 1}
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
			return nil, nil, err
		}
		s.size = size
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
		return nil, nil, err
	}
	l.collect()
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

// newSegment creates segment num and makes it the active one. l.mu is held (or l is not shared).
func (l *diskLog) newSegment(num uint64) error {
	path := filepath.Join(l.dir, fmt.Sprintf("%020d%s", num, segSuffix))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("audit queue segment: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		_ = f.Close()
		return err
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
// holds maxBytes it returns an error wrapping ErrQueueFull.
func (l *diskLog) Append(rec []byte) (uint64, error) {
	id, target, err := l.write(rec)
	if err != nil {
		return 0, err
	}
	if err := l.syncTo(target); err != nil {
		return 0, err
	}
	return id, nil
}

// write is Append without waiting for the disk: it returns the batch's ID and the position to
// pass to syncTo.
func (l *diskLog) write(rec []byte) (id, target uint64, err error) {
	size := int64(len(rec))
	if len(rec)-8 > maxRecord {
		return 0, 0, fmt.Errorf("%w (%w): a batch of %d bytes is over the record limit", ErrBatchTooLarge, ErrQueueFull, len(rec))
	}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return 0, 0, ErrStopped
	case l.failed != nil:
		err := l.failed
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("audit queue log failed earlier: %w", err)
	case size > l.maxBytes:
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("%w (%w): a batch of %d bytes on disk can never fit audit.queue.maxDiskBytes %d",
			ErrBatchTooLarge, ErrQueueFull, size, l.maxBytes)
	case l.size+size > l.maxBytes:
		used := l.size
		l.mu.Unlock()
		return 0, 0, fmt.Errorf("%w: %d of %d bytes on disk taken, batch of %d bytes", ErrQueueFull, used, l.maxBytes, size)
	}
	if a := l.active(); a.size > 0 && a.size+size > l.segmentBytes {
		if err := l.rotate(); err != nil {
			l.failed = err
			l.mu.Unlock()
			return 0, 0, err
		}
	}
	id = l.nextID
	l.nextID++
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(rec)-8)) //nolint:gosec // bounded by maxRecord above
	rec[8] = recBatch
	binary.LittleEndian.PutUint64(rec[9:17], id)
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(rec[8:], crcTable))
	a := l.active()
	if _, err := a.f.Write(rec); err != nil {
		// Part of the record may be in the file: take no more, the next start skips the torn tail.
		l.failed = fmt.Errorf("write audit queue segment: %w", err)
		l.mu.Unlock()
		return 0, 0, l.failed
	}
	a.size += size
	l.size += size
	a.pending++
	l.batchSeg[id] = a
	l.written += uint64(size)
	target = l.written
	l.mu.Unlock()
	return id, target, nil
}

// syncTo returns once everything written up to target is on disk. One caller fsyncs everything
// written so far while the others wait for it, then find their records synced (group commit).
func (l *diskLog) syncTo(target uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= target {
		return nil
	}
	l.mu.Lock()
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	if l.closed {
		// Close synced what was written (or set failed).
		l.mu.Unlock()
		return nil
	}
	upTo, f := l.written, l.active().f
	l.mu.Unlock()
	l.syncs.Add(1)
	if err := f.Sync(); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if upTo <= l.rotatedUpTo {
			// The segment was rotated out (and synced) meanwhile, and may be closed.
			l.synced = upTo
			return nil
		}
		l.failed = fmt.Errorf("sync audit queue segment: %w", err)
		return l.failed
	}
	l.synced = upTo
	return nil
}

// rotate syncs the active segment and starts a new one. l.mu is held.
func (l *diskLog) rotate() error {
	a := l.active()
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync audit queue segment: %w", err)
	}
	l.rotatedUpTo = l.written
	if err := l.newSegment(a.num + 1); err != nil {
		return err
	}
	l.collect()
	return nil
}

// Ack records that every event of each batch of ids was handled, with one write for all of
// their records. It does not wait for the disk. Acking an unknown batch, or after Close, does
// nothing.
func (l *diskLog) Ack(ids ...uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
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
			l.failed = fmt.Errorf("write audit queue segment: %w", err)
		} else {
			n := int64(len(recs))
			a.size += n
			l.size += n
			l.written += uint64(n)
		}
	}
	if collect {
		l.collect()
	}
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

// collect deletes the oldest segments while every batch in them is acknowledged (never the active
// one). Deleting only from the front keeps the ack records of the batches still kept. l.mu is
// held.
func (l *diskLog) collect() {
	for len(l.segs) > 1 && l.segs[0].pending == 0 {
		s := l.segs[0]
		if s.f != nil {
			_ = s.f.Close()
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("delete handled audit queue segment", "path", s.path, "error", err)
			return
		}
		l.size -= s.size
		l.deletedSegs.Add(1)
		l.segs[0] = nil
		l.segs = l.segs[1:]
	}
}

// Size returns the bytes of the log's segment files.
func (l *diskLog) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Close syncs the active segment (so that the acks written reach the disk) and closes the files.
// Appends and acks afterwards are refused or ignored. It may be called more than once.
func (l *diskLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if l.failed == nil {
		if serr := l.active().f.Sync(); serr != nil {
			err = fmt.Errorf("sync audit queue segment: %w", serr)
			l.failed = err
		}
	}
	l.closeFiles()
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
