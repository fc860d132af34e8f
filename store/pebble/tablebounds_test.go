package pebble

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
)

// Every table the store writes, at a flush or in a compaction, holds one kind of key, span
// and window-index keys of one window, and span keys of one segment: the compactions of the current window's writes then leave
// the change feed, the other indexes and earlier windows alone.
func TestTablesEndWhereKeysOrWindowsEnd(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	// Three windows of writes, each with its diff, object spans and change-feed entries.
	require.NoError(t, benchdata.Writes(benchdata.WritesConfig{Batch: 500, Objects: 500}, 6000, start, start.Add(90*time.Minute),
		func(spans []*aggregator.Span) error { return p.Export(ctx, spans) }))
	require.NoError(t, p.Sync(ctx))
	require.NoError(t, p.db.Flush())
	check := func(stage string) {
		levels, err := p.db.SSTables()
		require.NoError(t, err)
		kinds := map[byte]bool{}
		segs := map[byte]bool{}
		tables := 0
		for _, level := range levels {
			for _, tb := range level {
				tables++
				lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey
				require.NotEmpty(t, lo, stage)
				require.NotEmpty(t, hi, stage)
				kinds[lo[0]] = true
				assert.Equal(t, lo[0], hi[0], "%s: table %s holds keys of kinds %q to %q", stage, tb.FileNum, lo[0], hi[0])
				if lo[0] == prefixSpan || lo[0] == prefixWindow {
					assert.True(t, bytes.Equal(lo[:1+windowLen], hi[:1+windowLen]), "%s: table %s holds keys of two windows", stage, tb.FileNum)
				}
				if lo[0] == prefixSpan {
					assert.Equal(t, lo[1+windowLen], hi[1+windowLen], "%s: table %s holds span keys of two segments", stage, tb.FileNum)
					segs[lo[1+windowLen]] = true
				}
			}
		}
		// The data has every kind of key a new store writes (no trace index: traceindex.go), in
		// several tables: the check above saw them all.
		assert.False(t, kinds[prefixTrace], "%s: a new store writes no trace index entries", stage)
		for _, k := range []byte{prefixChange, prefixObject, prefixSpan, prefixWindow} {
			assert.True(t, kinds[k], "%s: no table of kind %q among %d", stage, k, tables)
		}
		assert.Len(t, segs, segments, "%s: span tables of every segment", stage)
	}
	check("after the flush")
	require.NoError(t, p.db.Compact(ctx, []byte{0}, []byte{0xff}, false))
	check("after a full compaction")
}

// Writes in time order, flushed window after window as a store filled with a day of writes is,
// leave L0 no more files than l0FileThreshold (and one flush's): Pebble moves them down rather
// than keeping hundreds until a burst of overlapping writes compacts them all at once.
func TestTimeOrderedFlushesLeaveFewFilesInL0(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{MaxAge: 100 * 365 * 24 * time.Hour}, nil)
	start := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	flushes, written := 0, 0
	require.NoError(t, benchdata.Writes(benchdata.WritesConfig{Batch: 2000, Objects: 2000}, 120000, start, start.Add(24*time.Hour),
		func(spans []*aggregator.Span) error {
			if err := p.Export(ctx, spans); err != nil {
				return err
			}
			if written += len(spans); written >= 4000 {
				written = 0
				flushes++
				if err := p.Sync(ctx); err != nil {
					return err
				}
				return p.db.Flush()
			}
			return nil
		}))
	require.GreaterOrEqual(t, flushes, 25)
	const oneFlush = 16 // a flush's tables: each kind of key, and span keys by window and segment
	var l0, all int64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := p.db.Metrics()
		l0, all = m.Levels[0].TablesCount, 0
		for _, l := range m.Levels {
			all += l.TablesCount
		}
		if l0 <= l0FileThreshold+oneFlush || time.Now().After(deadline) {
			break
		}
	}
	assert.LessOrEqual(t, l0, int64(l0FileThreshold+oneFlush), "L0 holds %d tables of %d", l0, all)
	assert.Greater(t, all, int64(2*l0FileThreshold), "the store holds more tables than L0 may keep")
}
