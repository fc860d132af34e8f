package auditlog

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// collector is a WaitEnqueuer that keeps what it gets.
type collector struct {
	mu       sync.Mutex
	clusters map[string]int
	ids      []string
	batches  int
	maxBatch int
	err      error
}

func (c *collector) EnqueueWait(_ context.Context, cluster string, events []*auditv1.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.clusters == nil {
		c.clusters = map[string]int{}
	}
	c.clusters[cluster] += len(events)
	c.batches++
	c.maxBatch = max(c.maxBatch, len(events))
	for _, ev := range events {
		c.ids = append(c.ids, ev.AuditID)
	}
	return nil
}

func (c *collector) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// logLine is a minimal audit log line with audit ID id.
func logLine(id string) string {
	return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id +
		`","stage":"ResponseComplete","verb":"update","user":{"username":"alice"},` +
		`"objectRef":{"resource":"pods","namespace":"ns","name":"p","apiVersion":"v1"},"responseStatus":{"code":200},` +
		`"responseObject":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","uid":"` + id + `"}},` +
		`"requestReceivedTimestamp":"2026-11-29T17:09:30.000000Z","stageTimestamp":"2026-11-29T17:09:30.005000Z"}` + "\n"
}

func TestLogReplayRolloutFixture(t *testing.T) {
	path := fixture.Path(t, "rollout", "audit.jsonl")
	var c collector
	stats, err := ReplayFile(context.Background(), path, "kind", &c, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, ReplayStats{Lines: 205, Events: 205}, stats)
	assert.Equal(t, map[string]int{"kind": 205}, c.clusters)

	// Same events, same order as the file.
	var want []string
	for _, ev := range auditfixture.Events(t, "rollout") {
		want = append(want, ev.AuditID)
	}
	assert.Equal(t, want, c.IDs())
	assert.LessOrEqual(t, c.maxBatch, replayBatchSize)
}

func TestLogReplayGzip(t *testing.T) {
	raw, err := os.ReadFile(fixture.Path(t, "rollout", "audit.jsonl"))
	require.NoError(t, err)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	path := filepath.Join(t.TempDir(), "audit.log.gz")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))

	var c collector
	stats, err := ReplayFile(context.Background(), path, "kind", &c, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, ReplayStats{Lines: 205, Events: 205}, stats)
}

func TestLogReplayBulkFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("30 MB")
	}
	var c collector
	stats, err := ReplayFile(context.Background(), fixture.Path(t, "bulk", "audit.jsonl.gz"), "bulk", &c, telemetry.Settings{})
	require.NoError(t, err)
	assert.Zero(t, stats.BadLines)
	assert.Equal(t, stats.Lines, stats.Events)
	assert.Greater(t, stats.Events, int64(5000))
	assert.Equal(t, map[string]int{"bulk": int(stats.Events)}, c.clusters)
	assert.Equal(t, replayBatchSize, c.maxBatch)
}

func TestLogReplayBadLines(t *testing.T) {
	var in strings.Builder
	in.WriteString(logLine("a1"))
	in.WriteString("not json\n")
	in.WriteString("\n   \n") // blank lines are skipped silently
	in.WriteString("[1,2,3]\n")
	in.WriteString(`{"kind":"Pod","apiVersion":"v1"}` + "\n") // JSON, not an audit event
	in.WriteString(`{"foo":"bar"}` + "\n")                    // no auditID
	in.WriteString(`{"auditID":"x","verb":3}` + "\n")         // wrong type
	in.WriteString(strings.TrimSuffix(logLine("a2"), "\n") + "\r\n")
	in.WriteString(`{"auditID":"` + strings.Repeat("x", maxLineSize) + `"}` + "\n") // too long
	in.WriteString(logLine("a3"))
	// A whole EventList on one line, as a saved webhook body.
	in.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		strings.TrimSuffix(logLine("l1"), "\n") + "," + strings.TrimSuffix(logLine("l2"), "\n") + "]}\n")
	// 40 more bad lines: their logs are rate-limited.
	for i := range 40 {
		fmt.Fprintf(&in, "garbage %d\n", i)
	}
	in.WriteString(strings.TrimSuffix(logLine("last"), "\n")) // no final newline

	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(in.String()), 0o600))
	var c collector
	h := &logtest.Recorder{}
	stats, err := ReplayFile(context.Background(), path, "c1", &c, telemetry.Settings{Logger: slog.New(h)})
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2", "a3", "l1", "l2", "last"}, c.IDs())
	assert.Equal(t, int64(6+40), stats.BadLines)
	assert.Equal(t, int64(5+6+40), stats.Lines)
	assert.Equal(t, int64(6), stats.Events)

	warns := h.Count(slog.LevelWarn)
	assert.Less(t, warns, 15, "bad-line logs are rate-limited")
	assert.Greater(t, warns, 1)
	// The first warning names the line.
	var firstLine int64
	h.Records()[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			firstLine = a.Value.Int64()
		}
		return true
	})
	assert.Equal(t, int64(2), firstLine)
}

func TestLogReplayErrors(t *testing.T) {
	_, err := ReplayFile(context.Background(), filepath.Join(t.TempDir(), "missing.log"), "c", &collector{}, telemetry.Settings{})
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(logLine("a")+logLine("b")), 0o600))
	c := &collector{err: queue.ErrStopped}
	stats, err := ReplayFile(context.Background(), path, "c", c, telemetry.Settings{})
	require.ErrorIs(t, err, queue.ErrStopped)
	assert.Zero(t, stats.Events)

	// A queue smaller than a batch still gets every event.
	q := newTestQueue(t, queue.Config{Capacity: 1, Partitions: 1}, func(context.Context, string, *auditv1.Event) {})
	require.NoError(t, q.Start(context.Background()))
	stats, err = ReplayFile(context.Background(), path, "c", q, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), stats.Events)
}

func TestLogLineReader(t *testing.T) {
	// Through a file that grows: a partial line is held until completed.
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	rf, err := os.Open(path)
	require.NoError(t, err)
	defer rf.Close()
	lr := newLineReader(rf)

	_, err = f.WriteString("one\ntw")
	require.NoError(t, err)
	line, tooLong, err := lr.next()
	require.NoError(t, err)
	assert.False(t, tooLong)
	assert.Equal(t, "one", string(line))
	_, _, err = lr.next()
	require.ErrorIs(t, err, io.EOF)
	_, err = f.WriteString("o\r\nthree")
	require.NoError(t, err)
	line, _, err = lr.next()
	require.NoError(t, err)
	assert.Equal(t, "two\r", string(line), "the batcher trims spaces; the reader only strips the newline")
	_, _, err = lr.next()
	require.ErrorIs(t, err, io.EOF)
	line, _, ok := lr.rest()
	require.True(t, ok)
	assert.Equal(t, "three", string(line))
	_, _, ok = lr.rest()
	assert.False(t, ok)
}

func TestLogFollowerConfig(t *testing.T) {
	require.Error(t, FollowConfig{}.Validate())
	require.Error(t, FollowConfig{Path: "x", PollInterval: -1}.Validate())
	require.NoError(t, FollowConfig{Path: "x"}.Validate())
	assert.Equal(t, defaultPollInterval, FollowConfig{Path: "x"}.withDefaults().PollInterval)
	_, err := NewFollower(FollowConfig{Path: "x"}, nil, telemetry.Settings{})
	require.Error(t, err)

	fl, err := NewFollower(FollowConfig{Path: "x"}, &collector{}, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, fl.Stop(context.Background()), "Stop without Start")
	require.Error(t, fl.Start(context.Background()), "Start after Stop")
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func waitIDs(t *testing.T, c *collector, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(c.IDs()) >= len(want) }, 5*time.Second, 5*time.Millisecond,
		"got %v, want %v", c.IDs(), want)
	// Nothing more arrives.
	require.Never(t, func() bool { return len(c.IDs()) > len(want) }, 30*time.Millisecond, 5*time.Millisecond,
		"got %v, want %v", c.IDs(), want)
	assert.Equal(t, want, c.IDs())
}

func TestLogFollowRotationAndTruncation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	var c collector
	reader := sdkmetric.NewManualReader()
	logs := &logtest.Recorder{}
	fl, err := NewFollower(FollowConfig{Path: path, Cluster: "c1", PollInterval: 5 * time.Millisecond}, &c,
		telemetry.Settings{Logger: slog.New(logs), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, fl.Start(ctx))
	defer func() { require.NoError(t, fl.Stop(ctx)) }()

	// The file does not exist yet: for a few poll intervals the follower finds nothing to read.
	require.Never(t, func() bool { return len(c.IDs()) > 0 }, 20*time.Millisecond, 5*time.Millisecond)
	appendFile(t, path, logLine("1")+logLine("2"))
	waitIDs(t, &c, "1", "2")

	// A partial line waits for its newline.
	l3 := logLine("3")
	appendFile(t, path, l3[:40])
	require.Never(t, func() bool { return len(c.IDs()) > 2 }, 30*time.Millisecond, 5*time.Millisecond, "got %v", c.IDs())
	appendFile(t, path, l3[40:]+"garbage\n")
	waitIDs(t, &c, "1", "2", "3")

	// Rotation by rename: a late write lands in the old file after the rename, then a new file
	// appears. The old file is read to its end (its last line even without a newline) first.
	old, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	_, err = old.WriteString(logLine("4"))
	require.NoError(t, err)
	require.NoError(t, os.Rename(path, filepath.Join(dir, "audit-2026-11-29T17-10-00.000.log")))
	_, err = old.WriteString(logLine("5") + strings.TrimSuffix(logLine("6"), "\n"))
	require.NoError(t, err)
	require.NoError(t, old.Close())
	// Line 5, written after the rename, arrives while no file is at the path: the follower keeps
	// reading the old handle, and holds its partial last line until the new file appears.
	waitIDs(t, &c, "1", "2", "3", "4", "5")
	appendFile(t, path, logLine("7")+strings.Repeat(" ", 400)+"\n") // padding, so that what follows the truncation is shorter
	waitIDs(t, &c, "1", "2", "3", "4", "5", "6", "7")

	// Truncation in place (copytruncate), then new content shorter than before.
	require.NoError(t, os.Truncate(path, 0))
	require.Eventually(t, func() bool { return loggedMessage(logs, "audit log truncated: reading it from the start") == 1 },
		5*time.Second, time.Millisecond, "the follower sees the empty file")
	appendFile(t, path, logLine("8"))
	waitIDs(t, &c, "1", "2", "3", "4", "5", "6", "7", "8")
	assert.Equal(t, map[string]int{"c1": 8}, c.clusters)

	sums := telemetrytest.Sums(t, reader, "")
	assert.Equal(t, int64(9), sums["kelemetry.audit.file.lines"])
	assert.Equal(t, int64(1), sums["kelemetry.audit.file.bad_lines"])
}

// loggedMessage counts the records logged with message msg.
func loggedMessage(logs *logtest.Recorder, msg string) int {
	n := 0
	for _, r := range logs.Records() {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// openAt reports whether this process holds path open at offset pos, from /proc/self/fd and
// /proc/self/fdinfo: the follower tells nobody when it opened its file and sought to its end.
func openAt(path string, pos int64) bool {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || target != path {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "pos:"); ok && strings.TrimSpace(v) == fmt.Sprint(pos) {
				return true
			}
		}
	}
	return false
}

func TestLogFollowStartAtEnd(t *testing.T) {
	if _, err := os.Stat("/proc/self/fdinfo"); err != nil {
		t.Skip("needs /proc/self/fdinfo to see when the follower opened the file")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir()) // as /proc/self/fd names it
	require.NoError(t, err)
	path := filepath.Join(dir, "audit.log")
	l2 := logLine("2")
	initial := logLine("1") + l2[:30]
	require.NoError(t, os.WriteFile(path, []byte(initial), 0o600))
	var c collector
	fl, err := NewFollower(FollowConfig{Path: path, PollInterval: 5 * time.Millisecond, StartAtEnd: true}, &c, telemetry.Settings{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, fl.Start(ctx))
	// Appending before the follower opened the file and sought to its end would skip the new
	// lines too.
	require.Eventually(t, func() bool { return openAt(path, int64(len(initial))) }, 5*time.Second, time.Millisecond,
		"the follower opens the file at its end")
	// The tail of the line that was partial at start is skipped silently.
	appendFile(t, path, l2[30:]+logLine("3"))
	waitIDs(t, &c, "3")
	require.NoError(t, fl.Stop(ctx))
	require.NoError(t, fl.Stop(ctx), "second Stop")
}

func TestLogFollowIntoQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	var lines strings.Builder
	for i := range 1000 {
		lines.WriteString(logLine(fmt.Sprint(i)))
	}
	require.NoError(t, os.WriteFile(path, []byte(lines.String()), 0o600))

	var h handledOrder
	q := newTestQueue(t, queue.Config{Capacity: 300, Partitions: 2}, h.handle)
	fl, err := NewFollower(FollowConfig{Path: path, PollInterval: 5 * time.Millisecond}, q, telemetry.Settings{})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, q.Start(ctx))
	require.NoError(t, fl.Start(ctx))
	require.Eventually(t, func() bool { return h.count() == 1000 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, fl.Stop(ctx))
	require.NoError(t, q.Stop(ctx))
	ids := h.byName["p"]
	require.Len(t, ids, 1000)
	for i, id := range ids {
		require.Equal(t, fmt.Sprint(i), id)
	}
}

func TestLogFollowStopWhileBlocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	require.NoError(t, os.WriteFile(path, []byte(logLine("1")+logLine("2")), 0o600))
	// A queue that never has room: the follower blocks in EnqueueWait.
	q := blockingEnqueuer{entered: make(chan struct{}, 1)}
	fl, err := NewFollower(FollowConfig{Path: path, PollInterval: 5 * time.Millisecond}, q, telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, fl.Start(context.Background()))
	select {
	case <-q.entered: // the follower waits for room
	case <-time.After(10 * time.Second):
		t.Fatal("the follower never enqueued")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, fl.Stop(ctx), context.DeadlineExceeded)
}

// The follower's counters are exported at 0 from the start, each reason included.
func TestFollowerCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	_, err := NewFollower(FollowConfig{Path: "x"}, &collector{},
		telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.audit.file.lines"))
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, "kelemetry.audit.file.bad_lines"))
	assert.Equal(t, telemetrytest.Zeros("reason", "unrepresentable_time", "future_time"),
		telemetrytest.Points(t, reader, "kelemetry.audit.file.dropped_events"))
}
