package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
)

// A window stamped far in the future (an event dated 2262) must not take the place of the real
// newest window that size retention protects, and age retention deletes it.
func TestPebbleRetentionFutureWindow(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, PebbleConfig{MaxAge: 24 * time.Hour, MaxBytes: 1 << 40},
		sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	obj := ref("c", "", "pods", "ns", "p")
	var windows []time.Time
	for i := range 4 {
		w := t0.Add(time.Duration(i) * win)
		windows = append(windows, w)
		require.NoError(t, p.Export(ctx, windowSpans(obj, w, 20, 4096)))
	}
	now := windows[3].Add(time.Minute) // the fake clock: inside the newest real window
	p.now = func() time.Time { return now }
	future := aggregator.WindowStart(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), win)
	near := windows[3].Add(20 * win) // 10h ahead: within the default skew of 24h
	require.NoError(t, p.Export(ctx, windowSpans(obj, future, 1, 16)))
	require.NoError(t, p.Export(ctx, windowSpans(obj, near, 1, 16)))

	present := func(w time.Time) bool {
		_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
		if err != nil {
			require.ErrorIs(t, err, ErrNotFound)
		}
		return err == nil
	}

	// No size pressure: age retention deletes the future window only.
	require.NoError(t, p.retain(ctx, p.now()))
	assert.False(t, present(future), "the 2262 window is deleted by age retention")
	for i, w := range windows {
		assert.True(t, present(w), "window %d kept", i)
	}
	assert.True(t, present(near), "a window within maxFutureSkew is kept")
	assert.Equal(t, int64(1), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", ReasonAge))

	// A future window written again, and a limit nothing can meet: the real newest window (the
	// one within the skew) survives, the future one does not.
	require.NoError(t, p.Export(ctx, windowSpans(obj, future, 1, 16)))
	p.cfg.MaxBytes = 1
	require.NoError(t, p.retain(ctx, p.now()))
	assert.False(t, present(future), "the 2262 window is deleted first")
	assert.True(t, present(near), "the newest window within the skew is protected")
	for i, w := range windows {
		assert.False(t, present(w), "window %d deleted for size", i)
	}
}

// Size retention alone (age retention not reaching the window yet, e.g. between the two
// steps) never protects a future window either.
func TestPebbleOldestWindowIgnoresFutureAsNewest(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, PebbleConfig{}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 1, 16)))
	future := aggregator.WindowStart(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), win)
	require.NoError(t, p.Export(ctx, windowSpans(obj, future, 1, 16)))
	limit := t0.Add(DefaultMaxFutureSkew).UnixNano()
	d, err := p.oldestWindow(ctx, 0, limit, true)
	require.NoError(t, err)
	require.True(t, d.deleted)
	assert.Equal(t, future.UnixNano(), d.window, "the future window goes first")
}
