package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Segments: span keys grouped by the time of their writes.
//
// A span key starts with its window and then the trace ID, and a steady ingest writes spans of
// every trace of the current window: each memtable flushed held keys from all over the window,
// so every compaction out of L0 rewrote the window's tables in the level below, and the work grew
// as the window filled. Worse, each flush wrote one blob file of values, and once a table would
// refer to more than MaxBlobReferenceDepth (64) of them a compaction copied the window's values
// into new blob files: under a steady 2,000 events/s the compactions grew from a fifth of the
// process's CPU in the tenth minute of a window to a third in the twenty-fifth.
//
// So a window's span keys are grouped into segments, sixths of the window by the time of the
// write: 's' window segment traceID spanID. An event span's segment is its start's (what its
// write follows); an object or a link span's, written while its window is the current one, is
// the sixth the store's clock is in (written later, its start's). A flush then overlaps the
// current segment's keys only, compactions rewrite at most a segment's worth, and no table
// refers to more than a segment's blob files.
//
// Object and link spans were kept in segment 0 until 2026-12: written all window long (an object
// span with each object first seen, a link span with each link), segment 0 grew with the window,
// every compaction out of L0 rewrote its tables (keys and blob references of the whole window
// so far), and once they referred to more than MaxBlobReferenceDepth (256) blob files, one per flush, a compaction copied all of its
// values into new blob files: 50 MB in 10.8 s, reading every blob file of the window,
// which Pebble then kept open (scripts/soak.sh: the CPU per event 17% higher in the last stretch,
// the open files from 34 to 54 and more). An object or link span written again in a later
// segment leaves its earlier version where it was: a read of several segments keeps the newer
// (dropRepeats), as a read of a Jaeger backend does.
//
// A read needs the segments a trace has spans in: beside its object index entry ('o' object
// window trace), a trace has an empty entry for each segment it has spans in (the same key and
// the segment's byte), written once per process and segment without reading anything, and
// FindObjects, which reads the entries anyway, returns them as ObjectWindow.Segments. Without
// them (a window found another way), every segment is read.
//
// Stores written before segments keep their windows as they were: the meta key segFromKey holds
// the first window written with segments, set once when such a store is first opened writable
// (after every window it holds), and windows before it are read and written without segments.

// segments is the number of segments of a window.
const segments = 6

// allSegments is the mask of every segment.
const allSegments = 1<<segments - 1

// segFromKey holds the first window (Unix nanoseconds, big endian) whose span keys have segments.
var segFromKey = []byte("msegfrom")

// segmented reports whether the span keys of window w have segments.
func (p *Store) segmented(w int64) bool { return w >= p.segFrom.Load() }

// segment is the segment of window w that span sp's key is in, -1 when window w has no
// segments: the sixth of the window its start is in, but for an object or a link span written
// while its window is the current one (now, Unix nanoseconds, within it), the sixth now is in.
// Those carry the window's start, or the time of the event that linked them, and a live ingest
// writes them all window long; a late write (a replay of an earlier window, say) keeps them with
// their start, beside their events.
func (p *Store) segment(sp *aggregator.Span, w, now int64) int {
	if !p.segmented(w) {
		return -1
	}
	if p.window <= 0 {
		return 0
	}
	at := sp.Start.UnixNano()
	if (sp.Kind == aggregator.KindObject || sp.Kind == aggregator.KindLink) && now >= w && now-w < int64(p.window) {
		at = now
	}
	d := at - w
	if d <= 0 {
		return 0
	}
	return int(min(d/int64(max(p.window/segments, time.Nanosecond)), segments-1))
}

// dropRepeats keeps one version of each object and link span of a trace read from several
// segments or windows, in place: an object or link span written again (by a later process, or
// once the engine forgot that it wrote it) is in the segment of that write. The newer version
// (query.Newer) stays, the one read later (from a later segment) when they tie. An event span
// has one key, in the segment of its start. The order of spans is not kept.
func dropRepeats(spans []*aggregator.Span) []*aggregator.Span {
	// The kept object and link spans' indexes: a trace has a handful, compared pairwise; a map
	// past that.
	var few [16]int
	kept := few[:0]
	var many map[trace.SpanID]int
	n := 0
	for _, sp := range spans {
		if sp.Kind == aggregator.KindObject || sp.Kind == aggregator.KindLink {
			i := -1
			if many != nil {
				if j, ok := many[sp.SpanID]; ok {
					i = j
				}
			} else {
				for _, j := range kept {
					if spans[j].SpanID == sp.SpanID {
						i = j
						break
					}
				}
			}
			if i >= 0 {
				if !query.Newer(spans[i], sp) {
					spans[i] = sp
				}
				continue
			}
			if many == nil && len(kept) == len(few) {
				many = make(map[trace.SpanID]int, 2*len(few))
				for _, j := range kept {
					many[spans[j].SpanID] = j
				}
			}
			if many != nil {
				many[sp.SpanID] = n
			} else {
				kept = append(kept, n)
			}
		}
		spans[n] = sp
		n++
	}
	clear(spans[n:])
	return spans[:n]
}

// spanPrefixes appends to dst the prefixes of the span keys of trace tid in window w: one without
// segments, else one per segment of mask (0: every segment).
func (p *Store) spanPrefixes(dst [][]byte, w int64, tid trace.TraceID, mask uint8) [][]byte {
	if !p.segmented(w) {
		return append(dst, appendSpanPrefix(nil, w, -1, tid))
	}
	if mask == 0 {
		mask = allSegments
	}
	for seg := range segments {
		if mask&(1<<seg) != 0 {
			dst = append(dst, appendSpanPrefix(nil, w, seg, tid))
		}
	}
	return dst
}

// initFromWindow sets dst to the window (Unix nanoseconds) from which a layout applies, kept
// under the meta key key; what names the layout in errors. When the key is missing it sets it:
// the first window of all for a new store (fresh), else the window after both the current one
// and the newest the store holds, so that every window written before keeps its layout; a store
// opened read-only gets the window it would set, and nothing is written. A store whose schema
// version says the key was written (marked) must have it.
func (p *Store) initFromWindow(dst *atomic.Int64, key []byte, what string, fresh, marked bool) error {
	from, err := p.readFromWindow(key, what, fresh, marked)
	if err != nil {
		return err
	}
	dst.Store(from)
	return nil
}

func (p *Store) readFromWindow(key []byte, what string, fresh, marked bool) (int64, error) {
	v, closer, err := p.db.Get(key)
	if err == nil {
		defer closer.Close()
		if len(v) != 8 {
			return 0, fmt.Errorf("%s: %q holds %d bytes, want 8: %w", what, key, len(v), errCorrupt)
		}
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("%s: read %q: %w", what, key, err)
	}
	if marked {
		return 0, fmt.Errorf("%s: %q missing from a store whose schema version has it: %w", what, key, errCorrupt)
	}
	from := int64(math.MinInt64)
	if !fresh {
		newest, err := p.newestWindow()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		now := p.now().UnixNano()
		length := max(int64(p.window), 1)
		from = max(now-now%length, newest) + length
	}
	if p.readOnly != "" {
		return from, nil // as it would be set; nothing of it is written yet
	}
	if err := p.db.Set(key, binary.BigEndian.AppendUint64(nil, uint64(from)), pebble.Sync); err != nil {
		return 0, fmt.Errorf("%s: write %q: %w", what, key, err)
	}
	return from, nil
}

// newestWindow is the newest window the window index holds (math.MinInt64 when none).
func (p *Store) newestWindow() (int64, error) {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixWindow}, UpperBound: prefixEnd([]byte{prefixWindow})})
	if err != nil {
		return 0, err
	}
	newest := int64(math.MinInt64)
	if it.Last() && len(it.Key()) == winKeyLen {
		newest = readWindow(it.Key()[1:])
	}
	return newest, it.Close()
}
