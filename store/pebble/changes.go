package pebble

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
)

// The change index: one entry per write event span, by time, for the cluster-wide feed.
//
//	'c' time(8) spanID(8) -> changefeed.Append of the write (its window and trace ID included)
//
// Times are Unix nanoseconds with the sign bit flipped, big endian, like windows. Retention
// deletes the entries of a window with it: an entry's time is never before its window's start,
// so deleting the oldest window w also deletes every entry timed at or before w; an entry of w
// timed later, and the entries of a deleted future window, are left out of answers (their
// window index entry is gone) until the retention of a later window deletes them.
const prefixChange = 'c'

const changeKeyLen = 1 + 8 + spanIDLen

func appendChangeKey(b []byte, t int64, sid trace.SpanID) []byte {
	b = append(b, prefixChange)
	b = appendWindow(b, t)
	return append(b, sid[:]...)
}

// writeChange adds the change index entry of sp to b when sp is a write's event span.
func writeChange(b *pebble.Batch, enc *encoder, sp *aggregator.Span) error {
	c, ok := changefeed.FromSpan(sp)
	if !ok {
		return nil
	}
	enc.key = appendChangeKey(enc.key[:0], sp.Start.UnixNano(), sp.SpanID)
	enc.val = changefeed.Append(enc.val[:0], &c)
	if err := b.Set(enc.key, enc.val, nil); err != nil {
		return fmt.Errorf("batch change index: %w", err)
	}
	return nil
}

// ChangeFeed returns the store's change feed (internal/changefeed): what was written when, by
// whom, across objects, from the change index, and the live tail of the writes it commits.
func (p *Store) ChangeFeed() *changefeed.Feed { return p.feed }

// initDeletedUpTo sets deletedUpTo at open: one before the oldest window stored (retention deleted
// the windows before it, or there were none).
func (p *Store) initDeletedUpTo() error {
	p.deletedUpTo.Store(math.MinInt64)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixWindow}, UpperBound: prefixEnd([]byte{prefixWindow})})
	if err != nil {
		return err
	}
	if it.First() && len(it.Key()) == winKeyLen {
		p.deletedUpTo.Store(readWindow(it.Key()[1:]) - 1)
	}
	return it.Close()
}

// noteDeleted records a window retention deleted; call with p.mu held.
func (p *Store) noteDeleted(d deletion) {
	if d.future {
		if p.deletedFuture == nil {
			p.deletedFuture = map[int64]bool{}
		}
		p.deletedFuture[d.window] = true
		return
	}
	if d.window > p.deletedUpTo.Load() {
		p.deletedUpTo.Store(d.window)
	}
	for w := range p.deletedFuture {
		if w <= d.window {
			delete(p.deletedFuture, w) // covered by deletedUpTo now
		}
	}
}

// findChanges answers the feed's queries: it reads the change index newest first from the end
// of q's range (or its cursor), about as many entries as it returns when the filters match most
// writes, at most q.MaxScan.
func (p *Store) findChanges(ctx context.Context, q changefeed.Query) (changefeed.Page, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return changefeed.Page{}, fmt.Errorf("find changes: %w", err)
	}
	lower := appendWindow([]byte{prefixChange}, q.From.UnixNano())
	upper := prefixEnd([]byte{prefixChange})
	if !q.To.IsZero() {
		upper = appendWindow([]byte{prefixChange}, q.To.UnixNano())
	}
	if !q.Before.IsZero() {
		if b := appendChangeKey(nil, q.Before.Time.UnixNano(), q.Before.SpanID); string(b) < string(upper) {
			upper = b
		}
	}
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return changefeed.Page{}, fmt.Errorf("find changes: %w", err)
	}
	first := true
	var winKey []byte
	page, err := changefeed.Collect(q, func() (time.Time, trace.SpanID, func() (changefeed.Change, error), bool, error) {
		var valid bool
		if first {
			valid, first = it.Last(), false
		} else {
			valid = it.Prev()
		}
		for valid && len(it.Key()) != changeKeyLen {
			valid = it.Prev()
		}
		if !valid {
			return time.Time{}, trace.SpanID{}, nil, false, it.Error()
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, trace.SpanID{}, nil, false, err
		}
		k := it.Key()
		t := time.Unix(0, readWindow(k[1:])).UTC()
		var sid trace.SpanID
		copy(sid[:], k[1+8:])
		return t, sid, func() (changefeed.Change, error) {
			v, err := it.ValueAndErr()
			if err != nil {
				return changefeed.Change{}, err
			}
			return changefeed.DecodeMatching(v, t, sid, &q)
		}, true, nil
	}, func(c *changefeed.Change) (bool, error) {
		// Left out when retention deleted its window (see prefixChange): looked up only for a
		// window retention may have deleted.
		w := c.Window.UnixNano()
		if w > p.deletedUpTo.Load() && !p.deletedFuture[w] {
			return true, nil
		}
		winKey = appendWindowKey(winKey[:0], w, c.TraceID)
		_, closer, err := p.db.Get(winKey)
		if errors.Is(err, pebble.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return true, closer.Close()
	})
	if cerr := it.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return page, fmt.Errorf("find changes: %w", err)
	}
	return page, nil
}
