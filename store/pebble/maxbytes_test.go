package pebble

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/telemetry"
)

// errorCounter is a slog handler that counts records at Error level.
type errorCounter struct{ n atomic.Int64 }

func (h *errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *errorCounter) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *errorCounter) WithGroup(string) slog.Handler                { return h }

// maxBytesTolerance is the documented overshoot of MaxBytes between two retention checks: one
// window's worth of new data plus the write-ahead log Pebble keeps (here 1/16 of the limit).
const maxBytesTolerance = 1.0 / 16

// Writing far past a small MaxBytes keeps the folder's real size (du, write-ahead log included)
// under the limit, and no check reports an error.
func TestPebbleMaxBytesBoundsDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 112 MiB")
	}
	ctx := context.Background()
	const limit = 64 << 20
	reader := sdkmetric.NewManualReader()
	errs := &errorCounter{}
	dir := t.TempDir()
	p, err := openPebble(ctx, Config{Dir: dir, MaxBytes: limit, MaxAge: 365 * 24 * time.Hour},
		0, telemetry.Settings{Logger: slog.New(errs), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}, vfs.Default)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.close()) })
	obj := ref("c", "", "pods", "ns", "p")

	var peak uint64
	for i := range 28 { // 28 windows of 4 MiB: 1.75 times the limit
		w := t0.Add(time.Duration(i) * win)
		for j := range 16 {
			require.NoError(t, p.Export(ctx, windowSpansFrom(obj, w, j*64, 64, 4096)))
		}
		require.NoError(t, p.retain(ctx, w.Add(time.Minute)))
		// Pebble removes obsolete files and finishes compactions in the background: give it a
		// moment (a slow machine, -race) before measuring. (The blob files of a deleted window's
		// values go a moment after its tables: about 5 MiB here, read in the folder in the
		// meantime.)
		var du uint64
		for range 50 {
			du, err = dirUsage(dir)
			require.NoError(t, err)
			if du <= limit {
				break
			}
			time.Sleep(100 * time.Millisecond) // the interval of this poll loop (50 tries: 5s at most)
		}
		peak = max(peak, du)
		assert.LessOrEqual(t, du, uint64(limit*(1+maxBytesTolerance)), "after window %d: %d bytes on disk", i, du)
		// The gauge is read between two du measurements; background compactions may change the
		// folder meanwhile, so a reading outside them is taken again.
		var gauge int64
		var before, after uint64
		for range 20 {
			before, err = dirUsage(dir)
			require.NoError(t, err)
			gauge = metricValue(t, reader, "kelemetry.store.size", "")
			after, err = dirUsage(dir)
			require.NoError(t, err)
			if gauge >= int64(min(before, after)) && gauge <= int64(max(before, after)) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the interval of this poll loop (20 tries: 1s at most)
		}
		assert.True(t, gauge >= int64(min(before, after)) && gauge <= int64(max(before, after)),
			"the size metric (%d) counts the folder as du does (%d..%d)", gauge, before, after)
	}
	t.Logf("peak folder size %d bytes (%.1f%% of maxBytes)", peak, 100*float64(peak)/limit)
	assert.Equal(t, int64(0), errs.n.Load(), "no error logged")
	assert.Equal(t, int64(0), metricValue(t, reader, "kelemetry.store.retention.over_limit", ""))
	assert.Positive(t, metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonSize))
}
