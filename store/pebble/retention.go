package pebble

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Start implements store.Store: it runs the retention loop in the background: one check at once,
// then one per CheckInterval. It does not block; calling it again while running does nothing.
// A stopped store returns an error.
func (p *Store) Start(_ context.Context) error {
	p.loopMu.Lock()
	defer p.loopMu.Unlock()
	if p.retention != nil {
		return nil
	}
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return fmt.Errorf("start store retention: %w", query.ErrClosed)
	}
	p.retention = &loop.Group{}
	p.retention.Start(p.retentionLoop, p.recoverLoop)
	return nil
}

// stopRetention ends the retention loop and waits for it, or for ctx. It is safe without
// Start; Start runs a new loop afterwards.
func (p *Store) stopRetention(ctx context.Context) error {
	p.loopMu.Lock()
	g := p.retention
	p.retention = nil
	p.loopMu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stop(ctx, "store retention")
}

// minWakeInterval is the shortest time between a retention check and one that low disk space
// asks for (wakeRetention).
const minWakeInterval = 2 * time.Second

func (p *Store) retentionLoop(ctx context.Context) {
	ticker := time.NewTicker(p.cfg.CheckInterval)
	defer ticker.Stop()
	for {
		if err := p.retain(ctx, p.now()); err != nil && ctx.Err() == nil {
			p.logger.Error("store retention failed", "error", err)
		}
		last := time.Now()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				waiting = false
			case <-p.wake:
				// A store that could not get under MaxBytes waits for the ticker: checking more
				// often would not help, only log more.
				waiting = p.stuckOver.Load() || time.Since(last) < minWakeInterval
			}
		}
	}
}

// wakeRetention asks the retention loop for a check now: the disk is nearly full, and ingest
// faster than one check interval's worth of the room left would otherwise have its writes
// refused until the next check. Writes call it again while the space stays low.
func (p *Store) wakeRetention() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// retain runs one retention check as of now: age first, then size. Windows starting after
// now+MaxFutureSkew (future-dated events) are deleted by age retention. Size retention protects
// the current window, the newest one starting at or before now, and deletes the windows dated
// after it (events stamped ahead of this clock, within MaxFutureSkew) before any older one.
func (p *Store) retain(ctx context.Context, now time.Time) error {
	p.mu.RLock()
	err := p.writable(true)
	p.mu.RUnlock()
	if err != nil {
		// Health reports it; the recovery loop works on it.
		p.logger.Debug("store retention skipped", "error", err)
		return nil
	}
	// A window [w, w+length) is older than MaxAge when w+length <= now-MaxAge.
	below := now.Add(-p.cfg.MaxAge).UnixNano() - int64(p.window) + 1
	limit := futureLimit(now, p.cfg.MaxFutureSkew)
	ageErr := p.retainAge(ctx, below, limit)
	sizeErr := p.retainSize(ctx, limit, now.UnixNano())
	return errors.Join(ageErr, sizeErr)
}

// futureLimit is the latest window start that still counts as current: now+skew, saturated.
func futureLimit(now time.Time, skew time.Duration) int64 {
	n := now.UnixNano()
	if n > math.MaxInt64-int64(skew) {
		return math.MaxInt64 - 1
	}
	return n + int64(skew)
}

func (p *Store) retainAge(ctx context.Context, below, limit int64) error {
	var done deletions
	var loopErr error
	for loopErr == nil {
		if loopErr = ctx.Err(); loopErr != nil {
			break
		}
		d, err := p.deleteOldestWindow(ctx, windowPick{below: below, limit: limit})
		if err != nil {
			loopErr = fmt.Errorf("age retention: %w", err)
			break
		}
		if !d.deleted {
			break
		}
		done.add(d)
	}
	if done.windows == 0 {
		return loopErr
	}
	mctx := context.WithoutCancel(ctx)
	p.deletedWindows.Add(mctx, done.windows, p.byAge)
	p.deletedSpans.Add(mctx, done.spans, p.byAge)
	p.logger.Info("store retention deleted old windows", "reason", reasonAge, "windows", done.windows, "spans", done.spans,
		"newestDeleted", query.UnixTime(done.last), "futureWindows", len(done.future))
	if loopErr != nil {
		return loopErr
	}
	return p.compactDeleted(ctx, &done)
}

// deletions sums up the windows one retention step deleted.
type deletions struct {
	windows, spans int64
	last           int64 // the newest deleted window that was not a future one
	haveLast       bool
	future         []int64 // deleted future windows (and, for size, windows dated after now)
}

func (s *deletions) add(d deletion) {
	s.windows++
	s.spans += d.spans
	if d.future {
		s.future = append(s.future, d.window)
		return
	}
	s.last, s.haveLast = d.window, true
}

// compactDeleted compacts what s deleted, so that it leaves the disk.
func (p *Store) compactDeleted(ctx context.Context, s *deletions) error {
	if s.haveLast {
		if err := p.compactRange(ctx, 0, s.last); err != nil {
			return err
		}
	}
	for _, w := range s.future {
		if err := p.compactRange(ctx, w, w); err != nil {
			return err
		}
	}
	return nil
}

// sizeRounds bounds the delete-compact-measure rounds of one size check: the per-window
// estimates miss what compactions and log files add, so the folder is measured again.
const sizeRounds = 3

// retainSize deletes windows while the folder is larger than MaxBytes: future windows (after
// futureLimit) first, then the windows dated after now (newest first), then the oldest ones;
// never the current window, the newest one starting at or before now.
func (p *Store) retainSize(ctx context.Context, futureLimit, now int64) error {
	pick := windowPick{limit: futureLimit, now: now, size: true}
	for round := range sizeRounds {
		again, err := p.retainSizeRound(ctx, pick, round == sizeRounds-1)
		if err != nil || !again {
			return err
		}
	}
	return nil
}

// retainSizeRound deletes windows (see retainSize) until the estimate fits MaxBytes. again says
// that windows were deleted and the folder is still too large; only the last round reports a
// store that cannot be brought under the limit.
func (p *Store) retainSizeRound(ctx context.Context, pick windowPick, last bool) (again bool, _ error) {
	limit := uint64(p.cfg.MaxBytes)
	usage, err := p.diskUsage(false)
	if err == nil && usage > limit {
		// Estimates per window only see flushed data.
		usage, err = p.diskUsage(true)
	}
	if err != nil || usage <= limit {
		if err == nil {
			p.stuckOver.Store(false)
		}
		return false, err
	}
	var done deletions
	estimate := usage
	exhausted := false
	var loopErr error
	for estimate > limit {
		if loopErr = ctx.Err(); loopErr != nil {
			break
		}
		d, err := p.deleteOldestWindow(ctx, pick)
		if err != nil {
			loopErr = fmt.Errorf("size retention: %w", err)
			break
		}
		if !d.deleted {
			exhausted = true
			break
		}
		done.add(d)
		estimate -= min(estimate, d.bytes)
	}
	if done.windows > 0 {
		mctx := context.WithoutCancel(ctx)
		p.deletedWindows.Add(mctx, done.windows, p.bySize)
		p.deletedSpans.Add(mctx, done.spans, p.bySize)
		p.logger.Info("store retention deleted oldest windows", "reason", reasonSize, "windows", done.windows, "spans", done.spans,
			"newestDeleted", query.UnixTime(done.last), "futureWindows", len(done.future), "sizeBytes", usage, "maxBytes", limit)
	}
	if loopErr != nil {
		return false, loopErr
	}
	if done.windows > 0 {
		if err := p.compactDeleted(ctx, &done); err != nil {
			return false, err
		}
	}
	after, err := p.diskUsage(false)
	if err != nil {
		return false, err
	}
	if after <= limit {
		p.stuckOver.Store(false)
	}
	if !exhausted {
		return after > limit && done.windows > 0, nil
	}
	if after > limit && (last || done.windows == 0) {
		p.stuckOver.Store(true)
		p.overLimit.Add(context.WithoutCancel(ctx), 1)
		p.logger.Error("store is larger than maxBytes and only the current window is left to delete",
			"sizeBytes", after, "maxBytes", limit, "deletedWindows", done.windows, "dir", p.cfg.Dir)
		return false, nil
	}
	return after > limit, nil
}

// diskUsage returns the disk space of the store's folder as du counts it, after flushing the
// memtable if flush is set (and the disk allows it).
func (p *Store) diskUsage(flush bool) (uint64, error) {
	if flush {
		if err := p.diskFlush(); err != nil {
			return 0, err
		}
	}
	usage, err := dirUsage(p.cfg.Dir)
	if err != nil {
		return 0, err
	}
	// Tables a compaction made obsolete stay on disk until Pebble's cleaner deletes them (paced,
	// in the background) or the last iterator reading them closes: they are leaving, and counting
	// them made a busy store delete more windows than it needed to.
	return usage - min(usage, p.leavingBytes()), nil
}

// leavingBytes is the size of the obsolete and zombie tables and blob files not yet deleted.
func (p *Store) leavingBytes() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.usable() != nil {
		return 0
	}
	m := p.db.Metrics()
	return m.Table.ObsoleteSize + m.Table.ZombieSize + m.BlobFiles.ObsoleteSize + m.BlobFiles.ZombieSize
}

// diskFlush flushes the memtable unless the disk cannot take it now.
func (p *Store) diskFlush() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return err
	}
	if p.diskState(true) != nil {
		return nil
	}
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

type deletion struct {
	deleted bool
	window  int64
	future  bool // a window after the future limit, or for size after now: only its own spans go
	spans   int64
	bytes   uint64 // estimated disk space of the window's spans
}

// windowPick says which window a retention step deletes (see oldestWindow).
type windowPick struct {
	below int64 // age: the oldest window goes when it starts before below
	limit int64 // windows starting after limit are future windows, deleted first
	now   int64 // size: the current window is the newest one starting at or before now
	size  bool  // size retention: the current window is kept, windows after it go first
}

// deleteOldestWindow deletes the window oldestWindow picks. Spans of older windows without
// index entries go with an oldest window. Finding and measuring the window happens while writes
// go on; only the deletion itself excludes them.
func (p *Store) deleteOldestWindow(ctx context.Context, pick windowPick) (deletion, error) {
	d, err := p.oldestWindow(ctx, pick)
	if err != nil || !d.deleted {
		return d, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writable(true); err != nil {
		return deletion{}, err
	}
	// Pending spans of the window would bring it back after the deletion. On a full disk the
	// commit fails (the deletion is what makes room): they stay pending, and the deletion goes on.
	if err := p.commitPendingNow(); err != nil {
		p.logger.Debug("store: deleting a window with spans pending", "error", err)
	}
	w := d.window

	// Collect the window's traces and their object strings.
	type entry struct {
		tid trace.TraceID
		obj []byte
	}
	var entries []entry
	lower := appendWindow([]byte{prefixWindow}, w)
	upper := appendWindow([]byte{prefixWindow}, w+1)
	err = p.scan(ctx, lower, upper, func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if len(k) != winKeyLen {
			return true, nil
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return false, err
		}
		e := entry{obj: append([]byte(nil), v...)}
		copy(e.tid[:], k[1+windowLen:])
		entries = append(entries, e)
		return true, nil
	})
	if err != nil {
		return deletion{}, fmt.Errorf("read window index: %w", err)
	}

	b := p.db.NewBatch()
	defer b.Close()
	var key []byte
	for _, e := range entries {
		key = appendObjectKey(key[:0], e.obj, w, e.tid)
		if err := b.Delete(key, nil); err != nil {
			return deletion{}, fmt.Errorf("batch delete: %w", err)
		}
		if p.segmented(w) {
			n := len(key)
			for seg := range segments {
				if err := b.Delete(append(key[:n], byte(seg)), nil); err != nil {
					return deletion{}, fmt.Errorf("batch delete: %w", err)
				}
			}
			key = key[:n]
		}
		if p.traceIndexed(w, e.tid) {
			key = appendTraceKey(key[:0], e.tid, w)
			if err := b.Delete(key, nil); err != nil {
				return deletion{}, fmt.Errorf("batch delete: %w", err)
			}
		}
	}
	spansFrom := []byte{prefixSpan}
	if d.future {
		spansFrom = appendWindow(spansFrom, w)
	}
	if err := b.DeleteRange(spansFrom, appendWindow([]byte{prefixSpan}, w+1), nil); err != nil {
		return deletion{}, fmt.Errorf("batch delete: %w", err)
	}
	if err := b.DeleteRange(lower, upper, nil); err != nil {
		return deletion{}, fmt.Errorf("batch delete: %w", err)
	}
	if !d.future {
		// The change entries timed at or before w are of w or of older, deleted windows.
		if err := b.DeleteRange([]byte{prefixChange}, appendWindow([]byte{prefixChange}, w+1), nil); err != nil {
			return deletion{}, fmt.Errorf("batch delete: %w", err)
		}
	}
	if err := p.apply(b); err != nil {
		return deletion{}, fmt.Errorf("delete window %s: %w", query.UnixTime(w), err)
	}
	for _, e := range entries {
		p.index.Remove(indexKey{tid: e.tid, window: w})
	}
	p.noteDeleted(d)
	return d, nil
}

// oldestWindow finds the window deleteOldestWindow deletes, counts its spans and estimates
// their size on disk. deleted is false when there is none. It is the newest window if it starts
// after pick.limit (a future window); otherwise, for age, the oldest window if it starts before
// pick.below; for size, the newest window if it starts after the current window (dated ahead of
// this clock: an event stamped up to MaxFutureSkew ahead must not cost the data of the present),
// else the oldest window unless it is the current one. The current window is the newest starting
// at or before pick.now, or the oldest window when all start after it.
func (p *Store) oldestWindow(ctx context.Context, pick windowPick) (deletion, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return deletion{}, err
	}
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: []byte{prefixWindow}, UpperBound: []byte{prefixWindow + 1},
	})
	if err != nil {
		return deletion{}, fmt.Errorf("iterate windows: %w", err)
	}
	defer it.Close()
	if !it.Last() || len(it.Key()) != winKeyLen {
		return deletion{}, it.Error()
	}
	last := readWindow(it.Key()[1:])
	if !it.First() || len(it.Key()) != winKeyLen {
		return deletion{}, it.Error()
	}
	first := readWindow(it.Key()[1:])
	d := deletion{deleted: true}
	switch {
	case last > pick.limit:
		d.window, d.future = last, true
	case !pick.size:
		if first >= pick.below {
			return deletion{}, nil
		}
		d.window = first
	case last > pick.now:
		current := first
		if pick.now < math.MaxInt64 && it.SeekLT(appendWindow([]byte{prefixWindow}, pick.now+1)) && len(it.Key()) == winKeyLen {
			current = readWindow(it.Key()[1:])
		} else if err := it.Error(); err != nil {
			return deletion{}, err
		}
		if last == current {
			return deletion{}, nil
		}
		d.window, d.future = last, true
	default:
		if first == last {
			return deletion{}, nil
		}
		d.window = first
	}
	w := d.window

	lower := appendWindow([]byte{prefixSpan}, w)
	upper := appendWindow([]byte{prefixSpan}, w+1)
	err = p.scan(ctx, lower, upper, func(*pebble.Iterator) (bool, error) {
		d.spans++
		return true, nil
	})
	if err != nil {
		return deletion{}, fmt.Errorf("count spans: %w", err)
	}
	if d.bytes, err = p.db.EstimateDiskUsage(lower, upper); err != nil {
		return deletion{}, fmt.Errorf("estimate window size: %w", err)
	}
	return d, nil
}

// compactRange compacts the span and window keys of windows from (0: the first) through to,
// so that deleted data leaves the disk.
func (p *Store) compactRange(ctx context.Context, from, to int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.writable(true); err != nil {
		return err
	}
	for _, prefix := range []byte{prefixSpan, prefixWindow} {
		lower := []byte{prefix}
		if from != 0 {
			lower = appendWindow(lower, from)
		}
		if err := p.db.Compact(ctx, lower, appendWindow([]byte{prefix}, to+1), false); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
	}
	return nil
}
