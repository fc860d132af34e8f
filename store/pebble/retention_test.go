package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// A window stamped far in the future (an event dated 2262) must not take the place of the real
// newest window that size retention protects, and age retention deletes it.
func TestPebbleRetentionFutureWindow(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, Config{MaxAge: 24 * time.Hour},
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
			require.ErrorIs(t, err, query.ErrNotFound)
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
	assert.Equal(t, int64(1), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonAge))

	// A future window written again, and a limit nothing can meet: the current window survives;
	// the future one, the one dated ahead within the skew and the older ones do not.
	require.NoError(t, p.Export(ctx, windowSpans(obj, future, 1, 16)))
	p.cfg.MaxBytes = 1
	require.NoError(t, p.retain(ctx, p.now()))
	assert.False(t, present(future), "the 2262 window is deleted first")
	assert.False(t, present(near), "a window dated ahead of the clock is not protected")
	assert.True(t, present(windows[3]), "the current window is protected")
	for i, w := range windows[:3] {
		assert.False(t, present(w), "window %d deleted for size", i)
	}
}

// Finding 4 of issue 35: an event dated hours ahead (within maxFutureSkew) made its one-event
// window the newest, which size retention protected, and the current window, holding nearly
// all the data, was deleted instead. The current window (the one holding now) is kept; the
// window dated ahead goes.
func TestPebbleSizeRetentionKeepsCurrentOverAheadWindow(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, Config{MaxAge: 365 * 24 * time.Hour}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	obj := ref("c", "", "pods", "ns", "p")
	current := t0.Add(2 * win)
	now := current.Add(10 * time.Minute)
	p.now = func() time.Time { return now }
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 50, 1024)))
	for i := range 20 { // about 2 MiB in the current window
		require.NoError(t, p.Export(ctx, windowSpansFrom(obj, current, i*100, 100, 1024)))
	}
	tomorrow := aggregator.WindowStart(now.Add(20*time.Hour), win)
	require.NoError(t, p.Export(ctx, windowSpans(obj, tomorrow, 1, 16)))
	require.NoError(t, p.Sync(ctx))
	require.NoError(t, p.diskFlush())

	// A limit the current window alone cannot meet.
	p.cfg.MaxBytes = 1 << 20
	require.NoError(t, p.retain(ctx, now))
	got, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), current))
	require.NoError(t, err, "the current window is kept")
	assert.Len(t, got, 2001, "with all its spans")
	for _, w := range []time.Time{t0, tomorrow} {
		_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
		assert.ErrorIs(t, err, query.ErrNotFound, "window %s deleted for size", w)
	}
	assert.Equal(t, int64(2), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonSize))
	assert.Equal(t, int64(1), metricValue(t, reader, "kelemetry.store.retention.over_limit", ""),
		"the current window alone is over the limit: reported, not deleted")
}

// The order of size retention: future windows, then the windows dated after the current one
// (the furthest first), then the oldest; the current window never. Without a window at or
// before now, the oldest window is the current one.
func TestPebbleSizeRetentionOrder(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	now := t0.Add(3*win + time.Minute)
	old, current := t0, t0.Add(2*win) // nothing yet in the window holding now: current is the newest before it
	ahead1, ahead2 := t0.Add(5*win), t0.Add(30*win)
	future := t0.Add(100 * 24 * time.Hour)
	for _, w := range []time.Time{old, current, ahead1, ahead2, future} {
		require.NoError(t, p.Export(ctx, windowSpans(obj, w, 1, 16)))
	}
	pick := windowPick{limit: futureLimit(now, defaultMaxFutureSkew), now: now.UnixNano(), size: true}
	for _, want := range []time.Time{future, ahead2, ahead1, old} {
		d, err := p.deleteOldestWindow(ctx, pick)
		require.NoError(t, err)
		require.True(t, d.deleted, "a window before %s is deleted", want)
		assert.Equal(t, want.UnixNano(), d.window)
	}
	d, err := p.deleteOldestWindow(ctx, pick)
	require.NoError(t, err)
	assert.False(t, d.deleted, "the current window is kept")
	_, err = p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), current))
	require.NoError(t, err)

	// Only windows dated after now: the oldest of them stands for the current one.
	pick.now = t0.Add(-time.Hour).UnixNano()
	require.NoError(t, p.Export(ctx, windowSpans(obj, ahead1, 1, 16)))
	d, err = p.deleteOldestWindow(ctx, pick)
	require.NoError(t, err)
	require.True(t, d.deleted)
	assert.Equal(t, ahead1.UnixNano(), d.window, "the newest goes")
	d, err = p.oldestWindow(ctx, pick)
	require.NoError(t, err)
	assert.False(t, d.deleted, "the oldest is kept")
}

// Size retention alone (age retention not reaching the window yet, e.g. between the two
// steps) never protects a future window either.
func TestPebbleOldestWindowIgnoresFutureAsNewest(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	require.NoError(t, p.Export(ctx, windowSpans(obj, t0, 1, 16)))
	future := aggregator.WindowStart(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), win)
	require.NoError(t, p.Export(ctx, windowSpans(obj, future, 1, 16)))
	limit := t0.Add(defaultMaxFutureSkew).UnixNano()
	d, err := p.oldestWindow(ctx, windowPick{limit: limit, now: t0.UnixNano(), size: true})
	require.NoError(t, err)
	require.True(t, d.deleted)
	assert.Equal(t, future.UnixNano(), d.window, "the future window goes first")
}

// The retention counters are exported at 0 from the start, each reason included.
func TestRetentionCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	openTestPebble(t, Config{}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	for _, name := range []string{"kelemetry.store.retention.deleted.windows", "kelemetry.store.retention.deleted.spans"} {
		assert.Equal(t, telemetrytest.Zeros("reason", "age", "size"), telemetrytest.Points(t, reader, name), name)
	}
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.store.retention.over_limit"))
}
