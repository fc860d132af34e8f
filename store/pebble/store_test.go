package pebble

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
	"github.com/kelemetry/kelemetry/telemetry"
)

func openTestPebble(t testing.TB, cfg Config, mp *sdkmetric.MeterProvider) *Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	var p *Store
	var err error
	if mp == nil {
		p, err = Open(context.Background(), cfg, 0, telemetry.Settings{Logger: slog.New(slog.DiscardHandler)})
	} else {
		p, err = Open(context.Background(), cfg, 0, telemetry.Settings{Logger: slog.New(slog.DiscardHandler), MeterProvider: mp})
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.close()) })
	return p
}

// metricValue sums the data points of an int64 sum or gauge, restricted to reason if set.
func metricValue(t *testing.T, r *sdkmetric.ManualReader, name, reason string) int64 {
	t.Helper()
	return telemetrytest.Int64(t, r, name, "reason", reason)
}

func TestPebbleReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "not", "yet")
	obj := ref("c", "apps", "deployments", "ns", "web")
	withUID := obj
	withUID.UID = "u1"
	root := objectSpan(withUID, t0)
	ev := eventSpan(obj, t0, "a", time.Minute)

	p, err := Open(ctx, Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, p.Export(ctx, []*aggregator.Span{root, ev}))
	require.NoError(t, p.close())
	require.NoError(t, p.close(), "second close")
	_, err = p.GetTrace(ctx, root.TraceID)
	require.ErrorIs(t, err, query.ErrClosed)
	require.ErrorIs(t, p.Export(ctx, []*aggregator.Span{ev}), query.ErrClosed)
	require.ErrorIs(t, p.Start(ctx), query.ErrClosed)

	p = openTestPebble(t, Config{Dir: dir}, nil)
	got, err := p.GetTrace(ctx, root.TraceID)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, root.SpanID, got[0].SpanID)
	assert.Equal(t, ev.SpanID, got[1].SpanID)

	// A new event after the restart must not replace the object from the object span.
	require.NoError(t, p.Export(ctx, []*aggregator.Span{eventSpan(obj, t0, "b", 2*time.Minute)}))
	res, err := p.FindObjects(ctx, query.ObjectQuery{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, withUID, res[0].Object)
	require.Len(t, res[0].Windows, 1)
	got, err = p.GetTrace(ctx, root.TraceID)
	require.NoError(t, err)
	assert.Len(t, got, 3)
}

func TestPebbleConfig(t *testing.T) {
	assert.Error(t, Config{}.Validate(), "dir is required")
	assert.NoError(t, Config{Dir: "x"}.Validate())
	assert.Error(t, Config{Dir: "x", MaxBytes: -1}.Validate())
	assert.Error(t, Config{Dir: "x", MaxAge: -time.Hour}.Validate())
	// Below the documented minimum: refused in one line, not an error logged at every check.
	err := Config{Dir: "x", MaxBytes: 16 << 20}.Validate()
	require.Error(t, err)
	assert.Equal(t, "store: maxBytes 16777216 is below the minimum of 67108864 (64 MiB)", err.Error())
	assert.Error(t, Config{Dir: "x", MaxBytes: minMaxBytes - 1}.Validate())
	assert.NoError(t, Config{Dir: "x", MaxBytes: minMaxBytes}.Validate())
	_, err = Open(context.Background(), Config{Dir: t.TempDir(), MaxBytes: 1 << 20}, 0, telemetry.Settings{})
	assert.ErrorContains(t, err, "below the minimum")
	c := Config{Dir: "x"}.withDefaults()
	assert.Equal(t, defaultMaxAge, c.MaxAge)
	assert.Equal(t, int64(defaultMaxBytes), c.MaxBytes)
	assert.Equal(t, defaultCheckInterval, c.CheckInterval)
	_, err = Open(context.Background(), Config{}, 0, telemetry.Settings{})
	assert.Error(t, err)
}

func TestPebbleStartStop(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{CheckInterval: time.Millisecond}, nil)
	require.NoError(t, p.stopRetention(ctx), "stop without start")
	require.NoError(t, p.Start(ctx))
	require.NoError(t, p.Start(ctx), "second start")
	require.NoError(t, p.stopRetention(ctx))
	require.NoError(t, p.stopRetention(ctx), "second stop")
	require.NoError(t, p.Start(ctx), "restart")
	require.NoError(t, p.Stop(ctx), "Stop ends the loop and closes the store")
	require.NoError(t, p.Stop(ctx), "second Stop")
	require.ErrorIs(t, p.Start(ctx), query.ErrClosed, "no start after Stop")
}

// windowSpans writes n event spans of about size bytes each (incompressible) into one object's
// trace in window w.
func windowSpans(obj aggregator.ObjectRef, w time.Time, n, size int) []*aggregator.Span {
	return windowSpansFrom(obj, w, 0, n, size)
}

// windowSpansFrom is windowSpans with event IDs from first on.
func windowSpansFrom(obj aggregator.ObjectRef, w time.Time, first, n, size int) []*aggregator.Span {
	spans := []*aggregator.Span{objectSpan(obj, w)}
	for i := first; i < first+n; i++ {
		sp := eventSpan(obj, w, fmt.Sprint(i), time.Duration(i)*time.Second)
		sp.Attributes = aggregator.Attrs{{Key: "payload"}}
		payload := make([]byte, size)
		_, _ = rand.Read(payload)
		sp.Attributes[0].Value = string(payload)
		spans = append(spans, sp)
	}
	return spans
}

func TestPebbleAgeRetention(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, Config{MaxAge: time.Hour}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	obj := ref("c", "", "pods", "ns", "p")
	other := ref("c", "", "pods", "ns", "q")
	var windows []time.Time
	for i := range 5 {
		w := t0.Add(time.Duration(i) * win)
		windows = append(windows, w)
		require.NoError(t, p.Export(ctx, []*aggregator.Span{objectSpan(obj, w), eventSpan(obj, w, "e", 0), objectSpan(other, w)}))
	}

	// Windows 0 and 1 end at or before now-MaxAge; window 2 ends a nanosecond after it.
	now := windows[2].Add(time.Hour + time.Nanosecond)
	require.NoError(t, p.retain(ctx, now))

	for i, w := range windows {
		_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
		if i < 2 {
			assert.ErrorIs(t, err, query.ErrNotFound, "window %d", i)
		} else {
			assert.NoError(t, err, "window %d", i)
		}
	}
	res, err := p.FindObjects(ctx, query.ObjectQuery{})
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Len(t, res[0].Windows, 3)
	assert.Equal(t, windows[2], res[0].Windows[0].Window)
	assert.Equal(t, int64(2), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonAge))
	assert.Equal(t, int64(6), metricValue(t, reader, "kelemetry.store.retention.deleted.spans", reasonAge))
	assert.Equal(t, int64(0), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonSize))
	assert.Equal(t, int64(15), metricValue(t, reader, "kelemetry.store.spans.written", ""))
	assert.Positive(t, metricValue(t, reader, "kelemetry.store.size", ""))

	// A late span for a deleted window gets its index back, so retention finds it again.
	require.NoError(t, p.Export(ctx, []*aggregator.Span{eventSpan(obj, windows[0], "late", 0)}))
	res, err = p.FindObjects(ctx, query.ObjectQuery{Name: "p", To: windows[0]})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, p.retain(ctx, now))
	res, err = p.FindObjects(ctx, query.ObjectQuery{Name: "p", To: windows[0]})
	require.NoError(t, err)
	assert.Empty(t, res)
	assert.Equal(t, int64(3), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonAge))
}

func TestPebbleSizeRetention(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	p := openTestPebble(t, Config{}, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	obj := ref("c", "", "pods", "ns", "p")
	const perWindow = 40 * 4096
	var windows []time.Time
	for i := range 6 {
		w := t0.Add(time.Duration(i) * win)
		windows = append(windows, w)
		require.NoError(t, p.Export(ctx, windowSpans(obj, w, 40, 4096)))
	}
	usage, err := p.diskUsage(true)
	require.NoError(t, err)
	require.Greater(t, usage, uint64(6*perWindow))

	present := func() []bool {
		var out []bool
		for _, w := range windows {
			_, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), w))
			if err != nil {
				require.ErrorIs(t, err, query.ErrNotFound)
			}
			out = append(out, err == nil)
		}
		return out
	}

	// Room for a little more than four windows: the oldest ones go, the newest stay.
	p.cfg.MaxBytes = int64(usage) - 3*perWindow/2
	now := windows[5].Add(time.Hour) // nothing is too old
	require.NoError(t, p.retain(ctx, now))
	got := present()
	deleted := 0
	for deleted < len(got) && !got[deleted] {
		deleted++
	}
	assert.GreaterOrEqual(t, deleted, 2, "at least two windows deleted: %v", got)
	assert.LessOrEqual(t, deleted, 3, "at most three windows deleted: %v", got)
	for i := deleted; i < len(got); i++ {
		assert.True(t, got[i], "oldest first: window %d kept: %v", i, got)
	}
	assert.Equal(t, int64(deleted), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonSize))
	assert.Equal(t, int64(deleted*41), metricValue(t, reader, "kelemetry.store.retention.deleted.spans", reasonSize))
	assert.Equal(t, int64(0), metricValue(t, reader, "kelemetry.store.retention.over_limit", ""))

	// A limit nothing can meet: everything but the newest window goes, and it is reported.
	p.cfg.MaxBytes = 1
	require.NoError(t, p.retain(ctx, now))
	assert.Equal(t, []bool{false, false, false, false, false, true}, present())
	assert.Equal(t, int64(1), metricValue(t, reader, "kelemetry.store.retention.over_limit", ""))
	assert.Equal(t, int64(5), metricValue(t, reader, "kelemetry.store.retention.deleted.windows", reasonSize))
	require.NoError(t, p.retain(ctx, now))
	assert.Equal(t, int64(2), metricValue(t, reader, "kelemetry.store.retention.over_limit", ""), "reported on every check")
}

func TestPebbleFatal(t *testing.T) {
	p := openTestPebble(t, Config{}, nil)
	pebbleLogger{logger: p.logger, failed: &p.failed}.Fatalf("disk on fire: %d", 1)
	err := p.Export(context.Background(), []*aggregator.Span{objectSpan(ref("c", "", "pods", "ns", "p"), t0)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk on fire: 1")
	assert.False(t, errors.Is(err, query.ErrClosed))
}

func TestPebbleConcurrentWritesReadsAndRetention(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{MaxAge: time.Hour}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	const windows = 20
	done := make(chan struct{})
	errs := make(chan error, 3)
	go func() {
		defer close(done)
		for i := range windows {
			w := t0.Add(time.Duration(i) * win)
			if err := p.Export(ctx, windowSpans(obj, w, 5, 64)); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if _, err := p.FindObjects(ctx, query.ObjectQuery{}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for {
		// Windows before the last two are older than MaxAge.
		now := t0.Add((windows-2)*win + time.Hour)
		require.NoError(t, p.retain(ctx, now))
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	require.NoError(t, <-errs)
	require.NoError(t, p.retain(ctx, t0.Add((windows-2)*win+time.Hour)))
	res, err := p.FindObjects(ctx, query.ObjectQuery{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Len(t, res[0].Windows, 2)
	for _, w := range res[0].Windows {
		got, err := p.GetTrace(ctx, w.TraceID)
		require.NoError(t, err)
		assert.Len(t, got, 6)
	}
}

// A second process on the same folder gets an error that says why. The first process is this
// test binary run again as TestPebbleLockHolder.
func TestPebbleLockedFolder(t *testing.T) {
	if os.Getenv("KELEMETRY_HOLD_STORE") != "" {
		t.Skip("the helper process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPebbleLockHolder$")
	cmd.Env = append(os.Environ(), "KELEMETRY_HOLD_STORE="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	hold, err := cmd.StdinPipe() // the helper holds the store until its stdin closes
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = hold.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "holding\n", line)

	_, err = Open(context.Background(), Config{Dir: dir}, 0, telemetry.Settings{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "another Kelemetry process")
}

// TestPebbleLockHolder opens the store of KELEMETRY_HOLD_STORE and keeps it open until its stdin
// closes (or it is killed).
func TestPebbleLockHolder(t *testing.T) {
	dir := os.Getenv("KELEMETRY_HOLD_STORE")
	if dir == "" {
		t.Skip("only as TestPebbleLockedFolder's helper process")
	}
	p, err := Open(context.Background(), Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	defer p.close()
	fmt.Println("holding")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestPebbleGetTracesAgreesWithGetTrace: GetTraces (which reuses its iterator's position, cuts
// attributes and logs from shared slabs, and reads a large set of windows in parts at once)
// gives, for windows asked for in any order, twice or with nothing stored, what GetTrace gives
// for each; and one span's slices never share room with another's.
func TestPebbleGetTracesAgreesWithGetTrace(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	var ws []query.ObjectWindow
	for o := range 4 * minReadPart / 3 { // four parts' worth of windows (as many parts as cores)
		obj := ref("c1", "", "pods", "ns", fmt.Sprintf("p%02d", o))
		for w := range 3 {
			if (o+w)%7 == 0 {
				continue // no trace here
			}
			start := t0.Add(time.Duration(w) * win)
			spans := windowSpans(obj, start, o%5, 64)
			for i, sp := range spans {
				sp.Logs = make([]aggregator.Log, i%3)
				for j := range sp.Logs {
					sp.Logs[j] = aggregator.Log{Time: sp.Start, Type: "diff", Message: fmt.Sprintf("line %d", j),
						Attributes: aggregator.Attrs{{Key: "k", Value: "v"}}}
				}
			}
			export(t, p, spans...)
		}
		for w := range 3 {
			start := t0.Add(time.Duration(w) * win)
			ws = append(ws, query.ObjectWindow{Window: start, TraceID: aggregator.TraceIDFor(obj.Key(), start)})
		}
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	var again []query.ObjectWindow // windows with a trace, asked for twice or three times
	for _, w := range ws {
		if _, err := p.GetTrace(ctx, w.TraceID); err == nil && len(again) < 3 {
			again = append(again, w)
		}
	}
	ws = append(ws, again[0], again[1], again[1], again[2])
	got, err := p.GetTraces(ctx, ws)
	require.NoError(t, err)
	require.Len(t, got, len(ws))
	nonEmpty := 0
	for i, w := range ws {
		want, err := p.GetTrace(ctx, w.TraceID)
		if errors.Is(err, query.ErrNotFound) {
			assert.Empty(t, got[i], "window %d has no trace", i)
			continue
		}
		require.NoError(t, err)
		nonEmpty++
		assert.Equal(t, want, got[i], "window %d", i)
	}
	assert.Greater(t, nonEmpty, 2*minReadPart)
	// Growing one span's attributes or logs leaves its neighbours alone.
	for _, spans := range got {
		if len(spans) < 2 {
			continue
		}
		next := slices.Clone(spans[1].Attributes)
		spans[0].Attributes = append(spans[0].Attributes, aggregator.Attr{Key: "added", Value: "x"})
		assert.Equal(t, next, spans[1].Attributes)
		logs := slices.Clone(spans[1].Logs)
		spans[0].Logs = append(spans[0].Logs, aggregator.Log{Type: "added"})
		assert.Equal(t, logs, spans[1].Logs)
	}
}

// FindExact answers like one exact FindObjects per key, in the order of the keys, whether it
// looks them up in one part or in several at once; names that are prefixes of others stay apart.
func TestPebbleFindExact(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{}, nil)
	var keys []aggregator.ObjectKey
	for i := range 300 {
		obj := ref("c", "", "pods", "ns", fmt.Sprintf("p%d", i)) // p1 is a prefix of p10..p19, p100..
		keys = append(keys, obj.Key())
		if i%3 != 2 {
			export(t, p, objectSpan(obj, t0.Add(time.Duration(i%3)*win)))
		}
		if i%3 == 1 { // a newer window, whose reference (the UID) wins
			later := obj
			later.UID = "new"
			export(t, p, objectSpan(later, t0.Add(2*win)))
		}
	}
	mrand.New(mrand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, n := range []int{1, 10, len(keys)} { // one part; several at once
		got, err := p.FindExact(ctx, keys[:n], t0, t0.Add(3*win))
		require.NoError(t, err)
		require.Len(t, got, n)
		for i, k := range keys[:n] {
			want, err := p.FindObjects(ctx, query.Exact(k, t0, t0.Add(3*win)))
			require.NoError(t, err)
			if len(want) == 0 {
				assert.Empty(t, got[i].Windows, k)
				continue
			}
			require.Len(t, want, 1)
			assert.Equal(t, want[0], got[i], k)
			assert.Equal(t, k, got[i].Object.Key())
		}
	}
	// The range narrows the windows as it does for FindObjects.
	one := ref("c", "", "pods", "ns", "p1").Key()
	got, err := p.FindExact(ctx, []aggregator.ObjectKey{one}, t0.Add(2*win), t0.Add(3*win))
	require.NoError(t, err)
	require.Len(t, got[0].Windows, 1)
	assert.Equal(t, "new", got[0].Object.UID)
	require.NoError(t, p.close())
	_, err = p.FindExact(ctx, []aggregator.ObjectKey{one}, t0, t0.Add(3*win))
	assert.ErrorIs(t, err, query.ErrClosed)
}

func TestPebble(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openTestPebble(t, Config{}, nil) }, storetest.Limits{})
}

func TestPebbleSearch(t *testing.T) {
	storetest.RunSearch(t, func(t *testing.T) storetest.Store { return openTestPebble(t, Config{}, nil) }, storetest.Limits{})
}

// The span builders of the shared suites.
var (
	t0         = storetest.T0
	ref        = storetest.Ref
	objectSpan = storetest.ObjectSpan
	eventSpan  = storetest.EventSpan
	export     = storetest.Export
)

const win = storetest.Win
