package tap

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// receiver is a real audit webhook (B of a chain) on a loopback port, enqueuing into a
// recording queue.
type receiver struct {
	srv *httptest.Server
	q   *recordingQueue
}

// startReceiver serves a webhook on addr ("" for any port); wrap, if set, wraps its handler.
func startReceiver(t *testing.T, addr string, wrap func(http.Handler) http.Handler) *receiver {
	t.Helper()
	r := &receiver{q: &recordingQueue{}}
	mux := http.NewServeMux()
	webhook.New(webhook.Config{}, webhook.Deps{Queue: r.q, Telemetry: telemetry.Settings{Logger: quietTestLogger()}}).Register(mux)
	var h http.Handler = mux
	if wrap != nil {
		h = wrap(mux)
	}
	r.srv = httptest.NewUnstartedServer(h)
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		require.NoError(t, r.srv.Listener.Close())
		r.srv.Listener = l
	}
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	return r
}

// events returns the audit IDs the receiver enqueued, by cluster.
func (r *receiver) events() map[string][]string {
	out := map[string][]string{}
	for _, b := range r.q.recorded() {
		for _, ev := range b.events {
			out[b.cluster] = append(out[b.cluster], ev.AuditID)
		}
	}
	return out
}

func (r *receiver) count() int {
	n := 0
	for _, ids := range r.events() {
		n += len(ids)
	}
	return n
}

// sender is a real audit webhook (A of a chain) with a Forwarder, on a loopback port.
type sender struct {
	srv    *httptest.Server
	q      *recordingQueue
	fw     *Forwarder
	reader *sdkmetric.ManualReader
}

func startSender(t *testing.T, cfg ForwardConfig) *sender {
	t.Helper()
	s := &sender{q: &recordingQueue{}, reader: sdkmetric.NewManualReader()}
	ts := telemetry.Settings{Logger: quietTestLogger(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))}
	var err error
	s.fw, err = NewForwarder(cfg, ts)
	require.NoError(t, err)
	require.NoError(t, s.fw.Start(context.Background()))
	w := webhook.New(webhook.Config{}, webhook.Deps{Queue: s.q, Taps: []webhook.BatchTap{s.fw}, Telemetry: ts})
	mux := http.NewServeMux()
	w.Register(mux)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// post posts body to the sender as cluster and returns the status.
func (s *sender) post(t *testing.T, cluster, body string) int {
	t.Helper()
	resp, err := http.Post(s.srv.URL+"/audit/"+cluster, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (s *sender) metric(t *testing.T, name, key, value string) int64 {
	t.Helper()
	return telemetrytest.Int64(t, s.reader, name, key, value)
}

func (s *sender) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.fw.Stop(ctx))
}

// eventBatch is an EventList of n events with audit IDs prefix-0 ... prefix-(n-1).
func eventBatch(prefix string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"level":"Metadata","auditID":"%s-%d","stage":"ResponseComplete","verb":"update",`+
			`"user":{"username":"admin"},"objectRef":{"resource":"pods","namespace":"default","name":"p%d","apiVersion":"v1"},`+
			`"responseStatus":{"code":200},"stageTimestamp":"2026-11-29T17:09:30.123456Z"}`, prefix, i, i)
	}
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`
}

func quietTestLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A -> B: every batch A accepts reaches B, under its cluster ({cluster} in the URL).
func TestForwardChainDeliversEveryEvent(t *testing.T) {
	b := startReceiver(t, "", nil)
	a := startSender(t, ForwardConfig{URL: b.srv.URL + "/audit/{cluster}"})
	var want []string
	for i := range 20 {
		require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch(fmt.Sprint("b", i), 3)))
		for j := range 3 {
			want = append(want, fmt.Sprintf("b%d-%d", i, j))
		}
	}
	require.Equal(t, http.StatusOK, a.post(t, "c2", eventBatch("other", 1)))
	require.Eventually(t, func() bool { return b.count() == 61 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string][]string{"c1": want, "c2": {"other-0"}}, b.events(), "in order, each under its cluster")
	a.stop(t)
	assert.Equal(t, int64(21), a.metric(t, "kelemetry.audit.forward.batches", "", ""))
	assert.Equal(t, int64(61), a.metric(t, "kelemetry.audit.forward.events", "", ""))
	assert.Zero(t, a.metric(t, "kelemetry.audit.forward.retries", "", ""))
	assert.Zero(t, a.metric(t, "kelemetry.audit.forward.dropped_events", "", ""))
	assert.Equal(t, int64(21), a.metric(t, "kelemetry.audit.forward.batches", "target", b.srv.URL+"/audit/{cluster}"))
}

// Items A dropped for their timestamps are not forwarded; the others are, as received.
func TestForwardOnlyAcceptedItems(t *testing.T) {
	var bodies [][]byte
	var mu sync.Mutex
	b := startReceiver(t, "", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			next.ServeHTTP(w, r)
		})
	})
	a := startSender(t, ForwardConfig{URL: b.srv.URL + "/audit/{cluster}"})
	batch := strings.Replace(eventBatch("x", 3), `"auditID":"x-1","stage":"ResponseComplete","verb":"update",`,
		`"auditID":"x-1","stage":"ResponseComplete","verb":"update","requestReceivedTimestamp":"9999-01-01T00:00:00Z",`, 1)
	require.Equal(t, http.StatusOK, a.post(t, "c1", batch))
	require.Eventually(t, func() bool { return b.count() == 2 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string][]string{"c1": {"x-0", "x-2"}}, b.events())
	a.stop(t)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 1)
	assert.NotContains(t, string(bodies[0]), "9999")
	assert.Contains(t, string(bodies[0]), `"name":"p2","apiVersion":"v1"}`, "items are sent as received")
}

// B is down for a while: A keeps answering 200, retries, and once B is up every event arrives.
func TestForwardRetriesUntilTargetUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	a := startSender(t, ForwardConfig{URL: "http://" + addr + "/audit/{cluster}", MaxBackoff: 50 * time.Millisecond})
	for i := range 10 {
		require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch(fmt.Sprint("b", i), 2)))
	}
	require.Eventually(t, func() bool { return a.metric(t, "kelemetry.audit.forward.retries", "", "") >= 3 },
		5*time.Second, 5*time.Millisecond)
	b := startReceiver(t, addr, nil)
	require.Eventually(t, func() bool { return b.count() == 20 }, 5*time.Second, 5*time.Millisecond)
	a.stop(t)
	assert.Equal(t, int64(20), a.metric(t, "kelemetry.audit.forward.events", "", ""))
	assert.Zero(t, a.metric(t, "kelemetry.audit.forward.dropped_events", "", ""))
}

// B answers 503 and 429 with Retry-After: A waits as long as asked, then delivers.
func TestForwardHonoursRetryAfter(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var times []time.Time
	b := startReceiver(t, "", func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			switch calls.Add(1) {
			case 1:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "busy", http.StatusServiceUnavailable)
			case 2:
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			default:
				next.ServeHTTP(w, r)
			}
		})
	})
	a := startSender(t, ForwardConfig{URL: b.srv.URL + "/audit/{cluster}", MaxBackoff: 10 * time.Millisecond})
	require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch("x", 1)))
	require.Eventually(t, func() bool { return b.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	a.stop(t)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, times, 3)
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 900*time.Millisecond, "Retry-After of the 503")
	assert.GreaterOrEqual(t, times[2].Sub(times[1]), 900*time.Millisecond, "Retry-After of the 429")
	assert.Equal(t, int64(2), a.metric(t, "kelemetry.audit.forward.retries", "", ""))
}

// B hangs: A's webhook still answers at once, its buffer fills and what does not fit is dropped
// and counted; Stop gives up when its context ends and counts the rest.
func TestForwardHangingTargetDoesNotHoldWebhook(t *testing.T) {
	release := make(chan struct{})
	var entered atomic.Int32
	b := startReceiver(t, "", func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "too late", http.StatusServiceUnavailable)
		})
	})
	defer close(release)
	one := len(eventBatch("b00", 2))
	a := startSender(t, ForwardConfig{URL: b.srv.URL + "/audit/{cluster}", MaxBufferBytes: int64(3 * one), Timeout: time.Minute})
	for i := range 10 {
		start := time.Now()
		require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch(fmt.Sprintf("b%02d", i), 2)))
		assert.Less(t, time.Since(start), 500*time.Millisecond, "the local path is not held up")
		if i == 0 {
			require.Eventually(t, func() bool { return entered.Load() == 1 }, 5*time.Second, time.Millisecond)
		}
	}
	assert.Equal(t, 10, len(a.q.recorded()), "every batch enqueued locally")
	assert.Equal(t, int64(7), a.metric(t, "kelemetry.audit.forward.dropped_batches", "reason", "buffer_full"))
	assert.Equal(t, int64(14), a.metric(t, "kelemetry.audit.forward.dropped_events", "reason", "buffer_full"))

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, a.fw.Stop(ctx), context.DeadlineExceeded)
	assert.Equal(t, int64(3), a.metric(t, "kelemetry.audit.forward.dropped_batches", "reason", "shutdown"))
	assert.Equal(t, int64(6), a.metric(t, "kelemetry.audit.forward.dropped_events", "reason", "shutdown"))
	assert.Zero(t, a.metric(t, "kelemetry.audit.forward.events", "", ""))
	require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch("late", 1)))
	assert.Equal(t, int64(1), a.metric(t, "kelemetry.audit.forward.dropped_batches", "reason", "stopped"))
}

// B refuses a batch with a 4xx other than 429: A drops and counts it, without retrying.
func TestForwardRefusedBatchDropped(t *testing.T) {
	b := startReceiver(t, "", nil)
	// B has no default cluster: a post to /audit is answered 400.
	a := startSender(t, ForwardConfig{URL: b.srv.URL + "/audit", MaxBackoff: time.Millisecond})
	require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch("x", 2)))
	require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch("y", 3)))
	require.Eventually(t, func() bool {
		return a.metric(t, "kelemetry.audit.forward.dropped_batches", "reason", "refused") == 2
	}, 5*time.Second, 5*time.Millisecond)
	a.stop(t)
	assert.Equal(t, int64(5), a.metric(t, "kelemetry.audit.forward.dropped_events", "reason", "refused"))
	assert.Zero(t, a.metric(t, "kelemetry.audit.forward.retries", "", ""))
	assert.Zero(t, b.count())
}

// TLS with a CA file and a bearer token read from a file.
func TestForwardTLSAndBearerToken(t *testing.T) {
	q := &recordingQueue{}
	mux := http.NewServeMux()
	webhook.New(webhook.Config{}, webhook.Deps{Queue: q, Telemetry: telemetry.Settings{Logger: quietTestLogger()}}).Register(mux)
	var auth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		mux.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	tokFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokFile, []byte("s3cret\n"), 0o600))

	a := startSender(t, ForwardConfig{URL: srv.URL + "/audit/{cluster}", CAFile: caFile, BearerTokenFile: tokFile})
	require.Equal(t, http.StatusOK, a.post(t, "c1", eventBatch("x", 1)))
	require.Eventually(t, func() bool { return len(q.recorded()) == 1 }, 5*time.Second, 5*time.Millisecond)
	a.stop(t)
	assert.Equal(t, "Bearer s3cret", auth.Load())

	_, err := NewForwarder(ForwardConfig{URL: srv.URL, CAFile: filepath.Join(dir, "missing.pem")}, telemetry.Settings{})
	assert.ErrorContains(t, err, "caFile")
}

func TestForwardConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     ForwardConfig
		wantErr string
	}{
		{ForwardConfig{URL: "http://b:8080/audit/{cluster}"}, ""},
		{ForwardConfig{URL: "https://b/audit", CertFile: "c", KeyFile: "k"}, ""},
		{ForwardConfig{}, "no url"},
		{ForwardConfig{URL: "ftp://b/audit"}, "want http or https"},
		{ForwardConfig{URL: "http:///audit"}, "no host"},
		{ForwardConfig{URL: "https://b/audit", CertFile: "c"}, "go together"},
		{ForwardConfig{URL: "https://b/audit", MaxBufferBytes: -1}, "negative"},
	} {
		err := tc.cfg.Validate()
		if tc.wantErr == "" {
			assert.NoError(t, err, tc.cfg.URL)
		} else {
			assert.ErrorContains(t, err, tc.wantErr, tc.cfg.URL)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "2": 2 * time.Second, "-1": 0, "junk": 0, "100000": maxRetryAfter,
		now.Add(3 * time.Second).Format(http.TimeFormat): 3 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
	} {
		assert.Equal(t, want, retryAfter(v, now), v)
	}
}

// The forwarder's and the dumper's counters are exported at 0 from the start: the forward target
// and every reason.
func TestTapCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	ts := telemetry.Settings{Logger: quietTestLogger(), MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}
	_, err := NewForwarder(ForwardConfig{URL: "http://user:secret@collector:8080/audit"}, ts)
	require.NoError(t, err)
	_, err = NewDumper(DumpConfig{Path: filepath.Join(t.TempDir(), "audit.jsonl")}, ts)
	require.NoError(t, err)

	target := map[string]int64{"target=http://user:xxxxx@collector:8080/audit": 0}
	for _, name := range []string{"kelemetry.audit.forward.batches", "kelemetry.audit.forward.events", "kelemetry.audit.forward.retries"} {
		assert.Equal(t, target, telemetrytest.Points(t, reader, name), name)
	}
	drops := map[string]int64{}
	for _, r := range []string{"buffer_full", "refused", "shutdown", "stopped", "bad_batch"} {
		drops["reason="+r+",target=http://user:xxxxx@collector:8080/audit"] = 0
	}
	assert.Equal(t, drops, telemetrytest.Points(t, reader, "kelemetry.audit.forward.dropped_batches"))
	assert.Equal(t, drops, telemetrytest.Points(t, reader, "kelemetry.audit.forward.dropped_events"))

	for _, name := range []string{"kelemetry.audit.dump.lines", "kelemetry.audit.dump.bytes", "kelemetry.audit.dump.rotations"} {
		assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, reader, name), name)
	}
	assert.Equal(t, telemetrytest.Zeros("reason", "buffer_full", "too_large", "write_error", "shutdown", "stopped"),
		telemetrytest.Points(t, reader, "kelemetry.audit.dump.dropped_lines"))
}
