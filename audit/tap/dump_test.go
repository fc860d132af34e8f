package tap

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/telemetry"
)

// dumpTest is a real webhook with a Dumper, served on a loopback port.
type dumpTest struct {
	*sender
	d    *Dumper
	path string
}

func startDump(t *testing.T, cfg DumpConfig, start bool) *dumpTest {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "sub", "audit.jsonl")
	}
	dt := &dumpTest{sender: &sender{q: &recordingQueue{}, reader: sdkmetric.NewManualReader()}, path: cfg.Path}
	ts := telemetry.Settings{Logger: quietTestLogger(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(dt.reader))}
	var err error
	dt.d, err = NewDumper(cfg, ts)
	require.NoError(t, err)
	if start {
		require.NoError(t, dt.d.Start(context.Background()))
	}
	w := webhook.New(webhook.Config{}, webhook.Deps{Queue: dt.q, Taps: []webhook.BatchTap{dt.d}, Telemetry: ts})
	mux := http.NewServeMux()
	w.Register(mux)
	dt.srv = httptest.NewServer(mux)
	t.Cleanup(dt.srv.Close)
	return dt
}

func (dt *dumpTest) stopDump(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, dt.d.Stop(ctx))
}

// readLines returns the non-empty lines of file.
func readLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	for line := range strings.Lines(string(data)) {
		require.True(t, strings.HasSuffix(line, "\n"), "every line is complete")
		out = append(out, strings.TrimSuffix(line, "\n"))
	}
	return out
}

// recordingWaitQueue records what a replay enqueues.
type recordingWaitQueue struct {
	mu     sync.Mutex
	events []*auditv1.Event
}

func (q *recordingWaitQueue) EnqueueWait(_ context.Context, _ string, events []*auditv1.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, events...)
	return nil
}

// The dump holds each accepted event as one line (the item as received, compacted; dropped
// items left out), and ReplayFile reads back the events the webhook enqueued.
func TestDumpIsReplayable(t *testing.T) {
	dt := startDump(t, DumpConfig{}, true)
	pretty := "{\n  \"kind\": \"EventList\",\n  \"apiVersion\": \"audit.k8s.io/v1\",\n  \"items\": [\n    " +
		strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(eventBatch("p", 2), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`), "]}"),
			`,"verb"`, ",\n      \"verb\"") + "\n  ]\n}\n"
	bad := strings.Replace(eventBatch("x", 3), `"auditID":"x-1","stage":"ResponseComplete","verb":"update",`,
		`"auditID":"x-1","stage":"ResponseComplete","verb":"update","requestReceivedTimestamp":"9999-01-01T00:00:00Z",`, 1)
	for _, body := range []string{eventBatch("a", 3), pretty, bad, eventBatch("t", 2)} {
		require.Equal(t, http.StatusOK, dt.post(t, "c1", body))
	}
	dt.stopDump(t)

	lines := readLines(t, dt.path)
	require.Len(t, lines, 3+2+2+2)
	assert.Equal(t, strings.TrimSuffix(strings.TrimPrefix(eventBatch("a", 3), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`), "]}"),
		strings.Join(lines[:3], ","), "items as received")
	assert.NotContains(t, strings.Join(lines, "\n"), "9999")
	var enqueued []*auditv1.Event
	for _, b := range dt.q.recorded() {
		enqueued = append(enqueued, b.events...)
	}
	q := &recordingWaitQueue{}
	st, err := auditlog.ReplayFile(context.Background(), dt.path, "c1", q, telemetry.Settings{Logger: quietTestLogger()})
	require.NoError(t, err)
	assert.Equal(t, int64(9), st.Events)
	assert.Zero(t, st.BadLines)
	assert.Equal(t, enqueued, q.events)

	assert.Equal(t, int64(9), dt.metric(t, "kelemetry.audit.dump.lines", "", ""))
	info, err := os.Stat(dt.path)
	require.NoError(t, err)
	assert.Equal(t, info.Size(), dt.metric(t, "kelemetry.audit.dump.bytes", "", ""))
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// The dump rotates at MaxBytes and keeps MaxFiles old files: the newest events, in order, within
// (MaxFiles+1) x MaxBytes. A restart appends to the current file.
func TestDumpRotationBounded(t *testing.T) {
	line := len(strings.TrimSuffix(strings.TrimPrefix(eventBatch("b00", 1), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`), "]}")) + 1
	cfg := DumpConfig{MaxBytes: int64(5*line + line/2), MaxFiles: 2}
	dt := startDump(t, cfg, true)
	cfg.Path = dt.path
	for i := range 20 {
		require.Equal(t, http.StatusOK, dt.post(t, "c1", eventBatch(fmt.Sprintf("b%02d", i), 1)))
	}
	dt.stopDump(t)
	dt2 := startDump(t, cfg, true)
	require.Equal(t, http.StatusOK, dt2.post(t, "c1", eventBatch("b20", 1)))
	dt2.stopDump(t)

	_, err := os.Stat(dt.path + ".3")
	require.ErrorIs(t, err, os.ErrNotExist, "at most MaxFiles old files")
	var ids []string
	for _, f := range []string{dt.path + ".2", dt.path + ".1", dt.path} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Size(), cfg.MaxBytes, f)
		for _, l := range readLines(t, f) {
			ev, err := auditv1.DecodeEvent([]byte(l))
			require.NoError(t, err)
			ids = append(ids, ev.AuditID)
		}
	}
	var want []string
	// Five lines a file: b00-b04 ... b15-b19 in the first run (three rotations), b20 rotates once
	// more.
	for i := 10; i <= 20; i++ {
		want = append(want, fmt.Sprintf("b%02d-0", i))
	}
	assert.Equal(t, want, ids, "the newest events, oldest file first")
	assert.Equal(t, int64(3), dt.metric(t, "kelemetry.audit.dump.rotations", "", ""))
	assert.Equal(t, int64(1), dt2.metric(t, "kelemetry.audit.dump.rotations", "", ""))
	assert.Equal(t, int64(20), dt.metric(t, "kelemetry.audit.dump.lines", "", ""))
}

// A full buffer never holds up the webhook: what does not fit is dropped and counted, and what
// is left when Stop gives up too.
func TestDumpBufferFullCounted(t *testing.T) {
	one := len(eventBatch("b00", 2))
	dt := startDump(t, DumpConfig{BufferBytes: int64(3 * one)}, false) // never started: nothing drains
	for i := range 5 {
		require.Equal(t, http.StatusOK, dt.post(t, "c1", eventBatch(fmt.Sprintf("b%02d", i), 2)))
	}
	assert.Equal(t, int64(4), dt.metric(t, "kelemetry.audit.dump.dropped_lines", "reason", "buffer_full"))
	assert.Equal(t, int64(3*one), dt.metric(t, "kelemetry.audit.dump.buffer_bytes", "", ""))
	dt.stopDump(t)
	assert.Equal(t, int64(6), dt.metric(t, "kelemetry.audit.dump.dropped_lines", "reason", "shutdown"))
	require.Equal(t, http.StatusOK, dt.post(t, "c1", eventBatch("late", 1)))
	assert.Equal(t, int64(1), dt.metric(t, "kelemetry.audit.dump.dropped_lines", "reason", "stopped"))
	assert.Zero(t, dt.metric(t, "kelemetry.audit.dump.lines", "", ""))
}

// An event longer than MaxBytes is not dumped (counted); the others are.
func TestDumpEventOverMaxBytes(t *testing.T) {
	dt := startDump(t, DumpConfig{MaxBytes: 400}, true)
	big := strings.Replace(eventBatch("big", 2), `"name":"p1"`, `"name":"`+strings.Repeat("n", 500)+`"`, 1)
	require.Equal(t, http.StatusOK, dt.post(t, "c1", big))
	dt.stopDump(t)
	lines := readLines(t, dt.path)
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], `"big-0"`)
	assert.Equal(t, int64(1), dt.metric(t, "kelemetry.audit.dump.dropped_lines", "reason", "too_large"))
}

func TestDumpConfigValidate(t *testing.T) {
	assert.NoError(t, DumpConfig{}.Validate())
	assert.ErrorContains(t, DumpConfig{Path: "x", MaxBytes: -1}.Validate(), "maxBytes")
	assert.ErrorContains(t, DumpConfig{Path: "x", MaxFiles: -1}.Validate(), "maxFiles")
	assert.ErrorContains(t, DumpConfig{Path: "x", BufferBytes: -1}.Validate(), "bufferBytes")
	_, err := NewDumper(DumpConfig{}, telemetry.Settings{})
	assert.Error(t, err)
}

// The raw items of a list, as the taps see them.
func TestRawListItems(t *testing.T) {
	items, err := rawListItems([]byte(` { "items" : [ {"a":1} , { "b" : [2, {}] } ], "kind":"EventList", "items":[{"c":3}] } `))
	require.NoError(t, err)
	require.Len(t, items, 1, "the last items member counts")
	assert.Equal(t, `{"c":3}`, string(items[0]))
	items, err = rawListItems([]byte(`{"items":[{"a":1} , { "b" : [2, {}] }]}`))
	require.NoError(t, err)
	assert.Equal(t, []string{`{"a":1}`, `{ "b" : [2, {}] }`}, []string{string(items[0]), string(items[1])})
	items, err = rawListItems([]byte(`{"k\u0069nd":"EventList","\u0069tems":[{"a":1}],"items":[]}`))
	require.NoError(t, err)
	assert.Empty(t, items, "escaped member names are decoded")
	// The body was accepted by DecodeEventList: what is checked is the structure, not every token.
	for _, bad := range []string{``, ` `, `[]`, `{"items":[1]}`, `{"items":[{"a":"}]}`, `{}{}`, `{"items":[{}]}}`} {
		_, err := rawListItems([]byte(bad))
		assert.Error(t, err, bad)
	}
	assert.ErrorContains(t, eachItem([]byte(`{"items":[{"i":0}]}`), nil, 2, func([]byte) error { return nil }), "decoded 2")
	var got []string
	require.NoError(t, eachItem([]byte(`{"items":[{"i":0},{"i":1},{"i":2},{"i":3}]}`), []int{0, 2}, 4, func(raw []byte) error {
		got = append(got, string(raw))
		return nil
	}))
	assert.Equal(t, []string{`{"i":1}`, `{"i":3}`}, got)
}

// Strings hide quotes, braces and whitespace from the item scanner and from compaction.
func TestRawItemsStringsAndCompaction(t *testing.T) {
	body := `{"items":[ {"a" : "x\"}] \\", "b":"\\\\"} ,{"c":"{[ ]}" , "d" : [ 1 , 2 ]}]}`
	items, err := rawListItems([]byte(body))
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, `{"a" : "x\"}] \\", "b":"\\\\"}`, string(items[0]))
	assert.Equal(t, `{"a":"x\"}] \\","b":"\\\\"}`, string(appendCompactJSON(nil, items[0])))
	assert.Equal(t, `{"c":"{[ ]}","d":[1,2]}`, string(appendCompactJSON(nil, items[1])))
}
