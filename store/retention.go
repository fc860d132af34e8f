package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/internal/loop"
)

// Start runs the retention loop in the background: one check at once, then one per
// CheckInterval. It does not block; calling it again while running does nothing. After Stop it
// starts a new loop.
func (p *Pebble) Start(_ context.Context) error {
	p.loopMu.Lock()
	defer p.loopMu.Unlock()
	if p.retention != nil {
		return nil
	}
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return fmt.Errorf("start store retention: %w", ErrClosed)
	}
	p.retention = &loop.Group{}
	p.retention.Start(p.retentionLoop)
	return nil
}

// Stop ends the retention loop and waits for it, or for ctx. It is safe without Start.
func (p *Pebble) Stop(ctx context.Context) error {
	p.loopMu.Lock()
	g := p.retention
	p.retention = nil
	p.loopMu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stop(ctx, "store retention")
}

func (p *Pebble) retentionLoop(ctx context.Context) {
	ticker := time.NewTicker(p.cfg.CheckInterval)
	defer ticker.Stop()
	for {
		if err := p.retain(ctx, p.now()); err != nil && ctx.Err() == nil {
			p.logger.Error("store retention failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// retain runs one retention check as of now: age first, then size.
func (p *Pebble) retain(ctx context.Context, now time.Time) error {
	// A window [w, w+length) is older than MaxAge when w+length <= now-MaxAge.
	below := now.Add(-p.cfg.MaxAge).UnixNano() - int64(p.window) + 1
	ageErr := p.retainAge(ctx, below)
	sizeErr := p.retainSize(ctx)
	return errors.Join(ageErr, sizeErr)
}

func (p *Pebble) retainAge(ctx context.Context, below int64) error {
	var windows, spans int64
	last := int64(0)
	var loopErr error
	for loopErr == nil {
		if loopErr = ctx.Err(); loopErr != nil {
			break
		}
		d, err := p.deleteOldestWindow(ctx, below, false)
		if err != nil {
			loopErr = fmt.Errorf("age retention: %w", err)
			break
		}
		if !d.deleted {
			break
		}
		windows++
		spans += d.spans
		last = d.window
	}
	if windows == 0 {
		return loopErr
	}
	mctx := context.WithoutCancel(ctx)
	p.deletedWindows.Add(mctx, windows, p.byAge)
	p.deletedSpans.Add(mctx, spans, p.byAge)
	p.logger.Info("store retention deleted old windows", "reason", ReasonAge, "windows", windows, "spans", spans,
		"newestDeleted", unixTime(last))
	if loopErr != nil {
		return loopErr
	}
	return p.compactThrough(ctx, last)
}

func (p *Pebble) retainSize(ctx context.Context) error {
	limit := uint64(p.cfg.MaxBytes)
	usage, err := p.diskUsage(false)
	if err != nil || usage <= limit {
		return err
	}
	// Estimates per window only see flushed data.
	if usage, err = p.diskUsage(true); err != nil || usage <= limit {
		return err
	}
	var windows, spans int64
	last := int64(0)
	estimate := usage
	exhausted := false
	var loopErr error
	for estimate > limit {
		if loopErr = ctx.Err(); loopErr != nil {
			break
		}
		d, err := p.deleteOldestWindow(ctx, 0, true)
		if err != nil {
			loopErr = fmt.Errorf("size retention: %w", err)
			break
		}
		if !d.deleted {
			exhausted = true
			break
		}
		windows++
		spans += d.spans
		last = d.window
		estimate -= min(estimate, d.bytes)
	}
	if windows > 0 {
		mctx := context.WithoutCancel(ctx)
		p.deletedWindows.Add(mctx, windows, p.bySize)
		p.deletedSpans.Add(mctx, spans, p.bySize)
		p.logger.Info("store retention deleted oldest windows", "reason", ReasonSize, "windows", windows, "spans", spans,
			"newestDeleted", unixTime(last), "sizeBytes", usage, "maxBytes", limit)
	}
	if loopErr != nil {
		return loopErr
	}
	if windows > 0 {
		if err := p.compactThrough(ctx, last); err != nil {
			return err
		}
	}
	if !exhausted {
		return nil
	}
	after, err := p.diskUsage(false)
	if err != nil {
		return err
	}
	if after > limit {
		p.overLimit.Add(context.WithoutCancel(ctx), 1)
		p.logger.Error("store is larger than maxBytes and only the newest window is left to delete",
			"sizeBytes", after, "maxBytes", limit, "deletedWindows", windows, "dir", p.cfg.Dir)
	}
	return nil
}

// diskUsage returns the disk space used, after flushing the memtable if flush is set.
func (p *Pebble) diskUsage(flush bool) (uint64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.usable(); err != nil {
		return 0, err
	}
	if flush {
		if err := p.db.Flush(); err != nil {
			return 0, fmt.Errorf("flush: %w", err)
		}
	}
	return p.db.Metrics().DiskSpaceUsage(), nil
}

type deletion struct {
	deleted bool
	window  int64
	spans   int64
	bytes   uint64 // estimated disk space of the window's spans
}

// deleteOldestWindow deletes the oldest window if it starts before below (age), or, with
// keepNewest, if it is not the newest window (size). Spans of older windows without index
// entries go too. Finding and measuring the window happens while writes go on; only the
// deletion itself excludes them.
func (p *Pebble) deleteOldestWindow(ctx context.Context, below int64, keepNewest bool) (deletion, error) {
	d, err := p.oldestWindow(ctx, below, keepNewest)
	if err != nil || !d.deleted {
		return d, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return deletion{}, err
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
		key = appendTraceKey(key[:0], e.tid, w)
		if err := b.Delete(key, nil); err != nil {
			return deletion{}, fmt.Errorf("batch delete: %w", err)
		}
	}
	if err := b.DeleteRange([]byte{prefixSpan}, appendWindow([]byte{prefixSpan}, w+1), nil); err != nil {
		return deletion{}, fmt.Errorf("batch delete: %w", err)
	}
	if err := b.DeleteRange(lower, upper, nil); err != nil {
		return deletion{}, fmt.Errorf("batch delete: %w", err)
	}
	if err := p.db.Apply(b, pebble.NoSync); err != nil {
		return deletion{}, fmt.Errorf("delete window %s: %w", unixTime(w), err)
	}
	for _, e := range entries {
		p.index.Remove(indexKey{tid: e.tid, window: w})
	}
	return d, nil
}

// oldestWindow finds the window deleteOldestWindow deletes, counts its spans and estimates
// their size on disk. deleted is false when there is none.
func (p *Pebble) oldestWindow(ctx context.Context, below int64, keepNewest bool) (deletion, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.usable(); err != nil {
		return deletion{}, err
	}
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: []byte{prefixWindow}, UpperBound: []byte{prefixWindow + 1},
	})
	if err != nil {
		return deletion{}, fmt.Errorf("iterate windows: %w", err)
	}
	defer it.Close()
	if !it.First() || len(it.Key()) != winKeyLen {
		return deletion{}, it.Error()
	}
	w := readWindow(it.Key()[1:])
	if keepNewest {
		if !it.Last() {
			return deletion{}, it.Error()
		}
		if readWindow(it.Key()[1:]) == w {
			return deletion{}, nil
		}
	} else if w >= below {
		return deletion{}, nil
	}

	d := deletion{deleted: true, window: w}
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

// compactThrough compacts the span and window keys of windows up to and including w, so that
// deleted data leaves the disk.
func (p *Pebble) compactThrough(ctx context.Context, w int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.usable(); err != nil {
		return err
	}
	for _, prefix := range []byte{prefixSpan, prefixWindow} {
		if err := p.db.Compact(ctx, []byte{prefix}, appendWindow([]byte{prefix}, w+1), false); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
	}
	return nil
}
