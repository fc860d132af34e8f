package pebble

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPebbleMemoryOutsideHeapWithDefaults: with the default configuration, Pebble's memory
// outside the Go heap (its memtables, allocated with C's allocator and counted in the process's
// RSS but not in the Go heap or GOMEMLIMIT) stays bounded while 64 MiB of spans are written: at
// most MemTableStopWritesThreshold (3) memtables of 16 MiB, usually two (the one written and the
// one kept for reuse), a third while a flush is slow.
func TestPebbleMemoryOutsideHeapWithDefaults(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	peak := uint64(0)
	for i := range 64 {
		obj := ref("c1", "", "pods", "default", fmt.Sprintf("pod-%d", i))
		require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 256, 4096))) // 1 MiB
		require.NoError(t, p.Sync(ctx))
		m := p.db.Metrics()
		peak = max(peak, m.MemTable.Size+m.MemTable.ZombieSize)
	}
	t.Logf("memtables peaked at %d MiB", peak>>20)
	assert.LessOrEqual(t, peak, uint64(3*16<<20))
}
