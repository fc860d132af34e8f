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
// So a window's span keys are grouped into segments, sixths of the window by the start of the
// span (what a span's write follows): 's' window segment traceID spanID. A flush then overlaps
// the current segment's keys only, compactions rewrite at most a segment's worth, and no table
// refers to more than a segment's blob files. Object and link spans, which a window keeps
// rewriting from its start (with the same start and ID each time), stay in segment 0.
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

// segment is the segment of window w that span sp's key is in: its start's sixth of the window
// (clamped to the window), 0 for object and link spans; -1 when window w has no segments.
func (p *Store) segment(sp *aggregator.Span, w int64) int {
	if !p.segmented(w) {
		return -1
	}
	if sp.Kind == aggregator.KindObject || sp.Kind == aggregator.KindLink || p.window <= 0 {
		return 0
	}
	d := sp.Start.UnixNano() - w
	if d <= 0 {
		return 0
	}
	return int(min(d/int64(max(p.window/segments, time.Nanosecond)), segments-1))
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
