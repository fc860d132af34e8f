package pebble

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// The trace index: the windows a trace ID has spans in.
//
// Up to schema version 3 every trace had an entry 't' traceID window, written with its first
// span in a window, so that a trace ID (GetTrace, FindTraces by an ID's leading bytes) found its
// windows. Those keys are in trace ID order, which is random: every memtable flushed held 't'
// keys from all over the index, so every compaction out of L0 rewrote the part of the whole index
// that lay in the level below, and that part grows with the store. With 1 million spans stored
// (internal/tools/curves), ingesting 10 distinct copies of the bulk fixture took 35-40% more CPU
// than into an empty store, most of it that rewrite (without the 't' writes: 5-8% more).
//
// A trace ID made by aggregator.TraceIDFor says its window, and the window index ('w' window
// traceID, in time order) holds every (window, trace) pair. So from schema version 4 only the
// traces whose ID does not say their window (IDs of other origins, written through the Jaeger
// storage API or OTLP; a span of an object's trace stored in another window) have 't' entries:
// GetTrace reads the window its ID says and those the trace index lists, and FindTraces (an ID's
// leading bytes) visits the window index, one seek to each window it holds and one to the ID in
// it, beside the trace index.
//
// Stores written before keep their windows as they were: the meta key traceIndexToKey holds the
// first window without 't' entries for every trace, set once when such a store is first opened
// writable (after every window it holds); the windows before it keep their entries, and late
// writes into them add more, so that those windows are read, and deleted by retention, as
// before.

// traceIndexToKey holds the first window (Unix nanoseconds, big endian) without trace index
// entries for the traces whose ID says their window.
var traceIndexToKey = []byte("mtidxto")

// traceIndexed reports whether trace tid has a trace index entry for window w: in every window
// before traceIdxTo, and from it on when its ID does not say w (an ID of another origin, or of
// another window), so that GetTrace finds a trace's windows without visiting every window and
// FindTraces, which visits them, leaves out what the trace index lists.
func (p *Store) traceIndexed(w int64, tid trace.TraceID) bool {
	return w < p.traceIdxTo.Load() || !idWindow(tid, w)
}

// idWindow reports whether tid is a trace ID made by aggregator.TraceIDFor for window w.
func idWindow(tid trace.TraceID, w int64) bool {
	_, win, ok := aggregator.ParseTraceID(tid)
	return ok && win.UnixNano() == w
}

// traceWindows calls fn with the window and trace ID of each entry of the window index whose
// trace ID starts with prefix (1 to 16 bytes), in windows from..to (inclusive), in key order: one
// seek to each window the index holds, one to prefix in it. fn returns false to stop.
func (p *Store) traceWindows(ctx context.Context, prefix []byte, from, to int64, fn func(w int64, tid trace.TraceID) bool) error {
	if from > to {
		return nil
	}
	upper := prefixEnd([]byte{prefixWindow})
	if to < math.MaxInt64 {
		upper = appendWindow([]byte{prefixWindow}, to+1)
	}
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{prefixWindow}, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("iterate window index: %w", err)
	}
	key := appendWindow([]byte{prefixWindow}, from)
	for valid, n := it.SeekGE(key), 0; valid; n++ {
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return err
			}
		}
		k := it.Key()
		if len(k) != winKeyLen {
			valid = it.Next()
			continue
		}
		w := readWindow(k[1:])
		key = append(appendWindow(append(key[:0], prefixWindow), w), prefix...)
		for valid = it.SeekGE(key); valid && bytes.HasPrefix(it.Key(), key); valid = it.Next() {
			var tid trace.TraceID
			copy(tid[:], it.Key()[1+windowLen:])
			if !fn(w, tid) {
				return closeIter(it)
			}
		}
		if w == math.MaxInt64 {
			break
		}
		key = appendWindow(append(key[:0], prefixWindow), w+1)
		valid = it.SeekGE(key)
	}
	return closeIter(it)
}

// closeIter closes it, with the error it met.
func closeIter(it *pebble.Iterator) error {
	if err := it.Close(); err != nil {
		return fmt.Errorf("iterate window index: %w", err)
	}
	return nil
}
