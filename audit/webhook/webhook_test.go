package webhook

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	k8saudit "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/telemetry"
)

// webhookFakeQueue is an Enqueuer that records batches, or fails with err.
type webhookFakeQueue struct {
	mu      sync.Mutex
	err     error
	batches []webhookBatch
	// entered, if set, receives a value when Enqueue is called; Enqueue then waits for release.
	entered chan struct{}
	release chan struct{}
}

type webhookBatch struct {
	cluster string
	events  []*auditv1.Event
}

func (q *webhookFakeQueue) Enqueue(_ context.Context, cluster string, events []*auditv1.Event) error {
	if q.entered != nil {
		q.entered <- struct{}{}
		<-q.release
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.batches = append(q.batches, webhookBatch{cluster: cluster, events: events})
	return nil
}

func (q *webhookFakeQueue) recorded() []webhookBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]webhookBatch(nil), q.batches...)
}

type webhookTest struct {
	webhook *Webhook
	mux     *http.ServeMux
	q       *webhookFakeQueue
	reader  *sdkmetric.ManualReader
	logs    *bytes.Buffer
	logMu   *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newWebhookTest(t *testing.T, cfg Config, taps ...BatchTap) *webhookTest {
	t.Helper()
	require.NoError(t, cfg.Validate())
	wt := &webhookTest{mux: http.NewServeMux(), q: &webhookFakeQueue{}, reader: sdkmetric.NewManualReader(),
		logs: new(bytes.Buffer), logMu: new(sync.Mutex)}
	logger := slog.New(slog.NewTextHandler(lockedWriter{mu: wt.logMu, w: wt.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	wt.webhook = New(cfg, Deps{Queue: wt.q, Taps: taps, Telemetry: telemetry.Settings{Logger: logger, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(wt.reader))}})
	wt.webhook.Register(wt.mux)
	return wt
}

func (wt *webhookTest) logText() string {
	wt.logMu.Lock()
	defer wt.logMu.Unlock()
	return wt.logs.String()
}

// post sends body to path and returns the recorded response.
func (wt *webhookTest) post(path string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, body)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	wt.mux.ServeHTTP(rec, req)
	return rec
}

// counters returns the sums of the webhook's counters by metric name and attribute value ("" if
// the point has none); a counter's values that are still 0 are left out.
func (wt *webhookTest) counters(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, wt.reader.Collect(context.Background(), &rm))
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			out[m.Name] = map[string]int64{}
			for _, dp := range sum.DataPoints {
				key := ""
				if iter := dp.Attributes.Iter(); iter.Next() {
					key = iter.Attribute().Value.String()
				}
				out[m.Name][key] += dp.Value
			}
			if sum.IsMonotonic {
				// Counters export their known reasons at 0 from the start: keep what counted.
				for k, v := range out[m.Name] {
					if v == 0 {
						delete(out[m.Name], k)
					}
				}
			}
		}
	}
	return out
}

const testBatch = `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` +
	`{"level":"Metadata","auditID":"a1","stage":"ResponseComplete","verb":"create","user":{"username":"admin"},` +
	`"objectRef":{"resource":"pods","namespace":"default","name":"p1","apiVersion":"v1"},"responseStatus":{"code":201},` +
	`"stageTimestamp":"2026-11-29T17:09:30.123456Z"},` +
	`{"level":"Metadata","auditID":"a2","stage":"ResponseStarted","verb":"watch","user":{"username":"admin"},` +
	`"stageTimestamp":"2026-11-29T17:09:31.123456Z"}]}`

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// onlyReader hides the concrete type of a reader so that the request has no Content-Length.
type onlyReader struct{ io.Reader }

func TestWebhookAcceptsBatch(t *testing.T) {
	wt := newWebhookTest(t, Config{})
	rec := wt.post("/audit/prod-1", strings.NewReader(testBatch), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	batches := wt.q.recorded()
	require.Len(t, batches, 1)
	assert.Equal(t, "prod-1", batches[0].cluster)
	require.Len(t, batches[0].events, 2)
	// Events of every stage and verb are enqueued: the consumer filters.
	assert.Equal(t, "a1", batches[0].events[0].AuditID)
	assert.Equal(t, "ResponseStarted", batches[0].events[1].Stage)
	assert.Equal(t, "watch", batches[0].events[1].Verb)

	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"200": 1}, c["kelemetry.audit.webhook.requests"])
	assert.Equal(t, map[string]int64{"": 2}, c["kelemetry.audit.webhook.events"])
	assert.Empty(t, c["kelemetry.audit.webhook.rejected"])
	assert.NotContains(t, wt.logText(), "level=INFO")
}

func TestWebhookCluster(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		path        string
		header      http.Header
		wantStatus  int
		wantCluster string
		wantBody    string
	}{
		{name: "from path", cfg: Config{DefaultCluster: "dflt"}, path: "/audit/east.prod_2", wantStatus: 200, wantCluster: "east.prod_2"},
		{name: "default", cfg: Config{DefaultCluster: "dflt"}, path: "/audit", wantStatus: 200, wantCluster: "dflt"},
		{
			name: "never from headers", cfg: Config{DefaultCluster: "dflt"}, path: "/audit",
			header:     http.Header{"X-Forwarded-For": {"10.1.2.3"}, "X-Cluster": {"evil"}, "X-Kelemetry-Cluster": {"evil"}},
			wantStatus: 200, wantCluster: "dflt",
		},
		{name: "no default", path: "/audit", wantStatus: 400, wantBody: "no cluster"},
		{name: "uppercase", cfg: Config{DefaultCluster: "dflt"}, path: "/audit/Prod", wantStatus: 400, wantBody: `invalid cluster name "Prod"`},
		{name: "leading dash", path: "/audit/-prod", wantStatus: 400, wantBody: "invalid cluster name"},
		{name: "escaped slash", path: "/audit/a%2Fb", wantStatus: 400, wantBody: `invalid cluster name "a/b"`},
		{name: "too long", path: "/audit/" + strings.Repeat("a", 64), wantStatus: 400, wantBody: "invalid cluster name"},
		{name: "bad characters", path: "/audit/a%20b%00", wantStatus: 400, wantBody: "invalid cluster name"},
		{name: "more segments", path: "/audit/a/b", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWebhookTest(t, tt.cfg)
			rec := wt.post(tt.path, strings.NewReader(testBatch), tt.header)
			require.Equal(t, tt.wantStatus, rec.Code, rec.Body.String())
			batches := wt.q.recorded()
			if tt.wantStatus != http.StatusOK {
				assert.Empty(t, batches)
				assert.Contains(t, rec.Body.String(), tt.wantBody)
				return
			}
			require.Len(t, batches, 1)
			assert.Equal(t, tt.wantCluster, batches[0].cluster)
		})
	}
}

func TestWebhookConfig(t *testing.T) {
	assert.Equal(t, int64(32<<20), Config{}.WithDefaults().MaxBodyBytes)
	assert.Equal(t, int64(10), Config{MaxBodyBytes: 10}.WithDefaults().MaxBodyBytes)
	require.NoError(t, Config{}.Validate())
	require.NoError(t, Config{DefaultCluster: "kind-kind", MaxBodyBytes: 1}.Validate())
	require.ErrorContains(t, Config{MaxBodyBytes: -1}.Validate(), "negative")
	require.ErrorContains(t, Config{DefaultCluster: "Kind Kind"}.Validate(), "invalid cluster name")
}

func TestWebhookMethodNotAllowed(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	for _, path := range []string{"/audit", "/audit/c"} {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			rec := httptest.NewRecorder()
			wt.mux.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(testBatch)))
			assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, method+" "+path)
		}
	}
	// Called directly, outside a mux, the handler refuses other methods too.
	rec := httptest.NewRecorder()
	New(Config{DefaultCluster: "c"}, Deps{Queue: wt.q, Telemetry: telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/audit", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	assert.Equal(t, "POST", rec.Header().Get("Allow"))
	assert.Empty(t, wt.q.recorded())
}

func TestWebhookBadRequest(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantBody string
	}{
		{name: "malformed JSON", body: `{"kind":"EventList",`, wantBody: "unexpected EOF"},
		{name: "not JSON", body: `hello`, wantBody: "invalid character 'h'"},
		{name: "empty", body: ``, wantBody: "unexpected EOF"},
		{name: "wrong kind", body: `{"kind":"Foo","apiVersion":"audit.k8s.io/v1","items":[]}`, wantBody: `wrong kind "Foo", want EventList`},
		{name: "wrong apiVersion", body: `{"kind":"EventList","apiVersion":"audit.k8s.io/v1beta1","items":[]}`, wantBody: `wrong apiVersion "audit.k8s.io/v1beta1", want audit.k8s.io/v1`},
		{name: "wrong field type", body: `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{},{"verb":1}]}`, wantBody: "items[1].verb: want string, got number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWebhookTest(t, Config{DefaultCluster: "c"})
			rec := wt.post("/audit", strings.NewReader(tt.body), nil)
			require.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
			body := rec.Body.String()
			assert.Contains(t, body, tt.wantBody)
			assert.Equal(t, 1, strings.Count(body, "\n"), "one line")
			assert.True(t, strings.HasSuffix(body, "\n"))
			assert.Empty(t, wt.q.recorded())

			assert.Equal(t, map[string]int64{"bad_request": 1}, wt.counters(t)["kelemetry.audit.webhook.rejected"])
			assert.Equal(t, map[string]int64{"400": 1}, wt.counters(t)["kelemetry.audit.webhook.requests"])
			logs := wt.logText()
			assert.Contains(t, logs, "level=WARN")
			assert.Contains(t, logs, "reason=bad_request")
		})
	}
}

func TestWebhookLogsNoBody(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	secret := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"requestObject":{"data":"s3cr3t"},"verb":1}]}`
	rec := wt.post("/audit", strings.NewReader(secret), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code)
	logs := wt.logText()
	assert.Contains(t, logs, "items[0].verb")
	assert.NotContains(t, logs, "s3cr3t")
}

func TestWebhookTooLarge(t *testing.T) {
	const limit = 600
	big := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"requestObject":"` + strings.Repeat("x", 2*limit) + `"}]}`
	tests := []struct {
		name   string
		body   func(t *testing.T) io.Reader
		header http.Header
	}{
		{name: "declared length", body: func(*testing.T) io.Reader { return strings.NewReader(big) }},
		{name: "streamed", body: func(*testing.T) io.Reader { return onlyReader{strings.NewReader(big)} }},
		{
			// Random bytes do not compress: the compressed body is over the limit already.
			name: "gzip streamed",
			body: func(t *testing.T) io.Reader {
				rng := rand.New(rand.NewPCG(3, 4))
				noise := make([]byte, 4*limit)
				for i := range noise {
					noise[i] = byte(rng.Uint32())
				}
				gz := gzipBytes(t, noise)
				require.Greater(t, len(gz), 2*limit)
				return onlyReader{bytes.NewReader(gz)}
			},
			header: http.Header{"Content-Encoding": {"gzip"}},
		},
		{
			// Compressed it fits the limit, decompressed it does not.
			name:   "gzip bomb",
			body:   func(t *testing.T) io.Reader { return bytes.NewReader(gzipBytes(t, []byte(big))) },
			header: http.Header{"Content-Encoding": {"gzip"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWebhookTest(t, Config{DefaultCluster: "c", MaxBodyBytes: limit})
			body := tt.body(t)
			rec := wt.post("/audit", body, tt.header)
			require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
			assert.Contains(t, rec.Body.String(), "limit of 600 bytes")
			assert.Empty(t, wt.q.recorded())
			assert.Equal(t, map[string]int64{"too_large": 1}, wt.counters(t)["kelemetry.audit.webhook.rejected"])
		})
	}
	// Exactly at the limit is fine.
	wt := newWebhookTest(t, Config{DefaultCluster: "c", MaxBodyBytes: int64(len(testBatch))})
	rec := wt.post("/audit", onlyReader{strings.NewReader(testBatch)}, nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	rec = wt.post("/audit", bytes.NewReader(gzipBytes(t, []byte(testBatch))), http.Header{"Content-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func TestWebhookGzip(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	rec := wt.post("/audit", bytes.NewReader(gzipBytes(t, []byte(testBatch))), http.Header{"Content-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Len(t, wt.q.recorded(), 1)
	assert.Len(t, wt.q.recorded()[0].events, 2)

	rec = wt.post("/audit", strings.NewReader(testBatch), http.Header{"Content-Encoding": {"gzip"}})
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "gzip")

	truncated := gzipBytes(t, []byte(testBatch))
	rec = wt.post("/audit", bytes.NewReader(truncated[:len(truncated)-10]), http.Header{"Content-Encoding": {"gzip"}})
	assert.Equal(t, http.StatusBadRequest, rec.Code)

	rec = wt.post("/audit", strings.NewReader(testBatch), http.Header{"Content-Encoding": {"br"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, rec.Code)
	assert.Contains(t, rec.Body.String(), `unsupported Content-Encoding "br"`)
	assert.Len(t, wt.q.recorded(), 1)
}

func TestWebhookEnqueueErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantReason string
	}{
		{name: "queue full", err: fmt.Errorf("partition 3: %w", queue.ErrFull), wantStatus: http.StatusTooManyRequests, wantReason: "queue_full"},
		{name: "batch can never fit", err: fmt.Errorf("%w: %w", queue.ErrFull, queue.ErrBatchTooLarge), wantStatus: http.StatusRequestEntityTooLarge, wantReason: "too_large"},
		{name: "stopped", err: queue.ErrStopped, wantStatus: http.StatusServiceUnavailable, wantReason: "stopped"},
		{name: "queue unavailable", err: fmt.Errorf("%w: NATS disconnected", queue.ErrUnavailable), wantStatus: http.StatusServiceUnavailable, wantReason: "queue_unavailable"},
		{name: "other", err: errors.New("disk on fire"), wantStatus: http.StatusInternalServerError, wantReason: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWebhookTest(t, Config{DefaultCluster: "c"})
			wt.q.err = tt.err
			rec := wt.post("/audit", strings.NewReader(testBatch), nil)
			require.Equal(t, tt.wantStatus, rec.Code)
			assert.Contains(t, rec.Body.String(), tt.err.Error())
			if tt.wantStatus == http.StatusTooManyRequests || tt.wantStatus == http.StatusServiceUnavailable {
				assert.Equal(t, "1", rec.Header().Get("Retry-After"), "kube-apiserver retries")
			} else {
				assert.Empty(t, rec.Header().Get("Retry-After"))
			}
			c := wt.counters(t)
			assert.Equal(t, map[string]int64{tt.wantReason: 1}, c["kelemetry.audit.webhook.rejected"])
			assert.Empty(t, c["kelemetry.audit.webhook.events"])
			assert.Contains(t, wt.logText(), "reason="+tt.wantReason)
		})
	}
}

// One client retrying a refused batch must not fill the log (the probe saw 34 MB in 10 minutes):
// refusals are logged rate-limited per reason, a later line says how many were suppressed, and
// the counters count every one.
func TestWebhookRejectLogRateLimited(t *testing.T) {
	const n = 1000
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	wt.q.err = fmt.Errorf("partition 3: %w", queue.ErrFull)
	for range n {
		rec := wt.post("/audit", strings.NewReader(testBatch), nil)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
	}
	rejectedLines := func(reason string) []string {
		var out []string
		for _, l := range strings.Split(wt.logText(), "\n") {
			if strings.Contains(l, `msg="audit batch rejected"`) && strings.Contains(l, "reason="+reason+" ") {
				out = append(out, l)
			}
		}
		return out
	}
	assert.Len(t, rejectedLines("queue_full"), rejectLogBurst, "a burst, then nothing within the interval")

	// Another reason has a limiter of its own: a malformed batch is still logged.
	rec := wt.post("/audit", strings.NewReader("not json"), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Len(t, rejectedLines("bad_request"), 1)

	// Once the interval passed, the next line carries the number suppressed. The interval is a
	// nanosecond: it passed while the request above was served, so there is nothing to wait for.
	wt.webhook.rejectLogs[rejectQueueFull].Every = time.Nanosecond
	rec = wt.post("/audit", strings.NewReader(testBatch), nil)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	lines := rejectedLines("queue_full")
	require.Len(t, lines, rejectLogBurst+1)
	assert.Contains(t, lines[len(lines)-1], fmt.Sprintf("suppressedSinceLastLog=%d", n-rejectLogBurst))

	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"queue_full": n + 1, "bad_request": 1}, c["kelemetry.audit.webhook.rejected"])
	assert.Equal(t, map[string]int64{"429": n + 1, "400": 1}, c["kelemetry.audit.webhook.requests"])
}

func TestWebhookAnswersAfterEnqueue(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	wt.q.entered = make(chan struct{})
	wt.q.release = make(chan struct{})
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- wt.post("/audit", strings.NewReader(testBatch), nil) }()
	<-wt.q.entered
	select {
	case <-done:
		t.Fatal("answered before the batch was enqueued")
	case <-time.After(50 * time.Millisecond):
	}
	close(wt.q.release)
	rec := <-done
	assert.Equal(t, http.StatusOK, rec.Code)
}

func TestWebhookConcurrentBadAndGoodBatch(t *testing.T) {
	wt := newWebhookTest(t, Config{RepeatWindow: -1}) // the same good batch, queued each time
	good := fixture.Lines(t, "rollout", "webhook-batches.jsonl")[0]
	bad := append(append([]byte(nil), good[:len(good)/2]...), []byte(`,,,`)...)
	want, err := auditv1.DecodeEventList(good)
	require.NoError(t, err)

	const rounds = 20
	var wg sync.WaitGroup
	codes := make(chan [2]int, rounds)
	for range rounds {
		wg.Add(2)
		var goodCode, badCode int
		var inner sync.WaitGroup
		inner.Add(2)
		go func() {
			defer wg.Done()
			defer inner.Done()
			goodCode = wt.post("/audit/good", bytes.NewReader(good), nil).Code
		}()
		go func() {
			defer wg.Done()
			defer inner.Done()
			badCode = wt.post("/audit/bad", bytes.NewReader(bad), nil).Code
		}()
		go func() { inner.Wait(); codes <- [2]int{goodCode, badCode} }()
	}
	wg.Wait()
	for range rounds {
		c := <-codes
		assert.Equal(t, http.StatusOK, c[0])
		assert.Equal(t, http.StatusBadRequest, c[1])
	}
	batches := wt.q.recorded()
	require.Len(t, batches, rounds)
	for _, b := range batches {
		assert.Equal(t, "good", b.cluster)
		assert.Equal(t, want, b.events)
	}
}

func TestWebhookReplaysRecordedBatches(t *testing.T) {
	wt := newWebhookTest(t, Config{})
	lines := fixture.Lines(t, "rollout", "webhook-batches.jsonl")
	wantEvents := 0
	for i, line := range lines {
		var list k8saudit.EventList
		require.NoError(t, json.Unmarshal(line, &list))
		wantEvents += len(list.Items)
		rec := wt.post("/audit/rollout", bytes.NewReader(line), http.Header{"Content-Type": {"application/json"}})
		require.Equal(t, http.StatusOK, rec.Code, "line %d: %s", i+1, rec.Body.String())
		require.Len(t, wt.q.recorded(), i+1)
		batch := wt.q.recorded()[i]
		require.Len(t, batch.events, len(list.Items), "line %d", i+1)
		for j := range list.Items {
			assert.Equal(t, string(list.Items[j].AuditID), batch.events[j].AuditID)
		}
	}
	got := 0
	for _, b := range wt.q.recorded() {
		assert.Equal(t, "rollout", b.cluster)
		got += len(b.events)
	}
	assert.Equal(t, wantEvents, got)
	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"": int64(wantEvents)}, c["kelemetry.audit.webhook.events"])
	assert.Equal(t, map[string]int64{"200": int64(len(lines))}, c["kelemetry.audit.webhook.requests"])
	assert.Empty(t, wt.logText(), "no logs for accepted batches")
}

func TestWebhookMetricAttributes(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	wt.post("/audit", strings.NewReader(testBatch), nil)
	m := wt.metric(t, "kelemetry.audit.webhook.requests")
	// Every code the webhook answers is exported from the start, as an int attribute.
	byCode := map[int64]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		v, ok := dp.Attributes.Value(attribute.Key("code"))
		require.True(t, ok)
		byCode[v.AsInt64()] = dp.Value
	}
	assert.Equal(t, map[int64]int64{200: 1, 400: 0, 413: 0, 429: 0, 500: 0, 503: 0}, byCode)
}

// metric is the webhook's metric name; the test fails without it.
func (wt *webhookTest) metric(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, wt.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

// Every answer is timed, refusals too: the histogram's count is the number of requests.
func TestWebhookDuration(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	wt.post("/audit", strings.NewReader(testBatch), nil)
	wt.post("/audit", strings.NewReader(`{"kind":"Foo"}`), nil)
	m := wt.metric(t, "kelemetry.audit.webhook.duration")
	assert.Equal(t, "s", m.Unit)
	dps := m.Data.(metricdata.Histogram[float64]).DataPoints
	require.Len(t, dps, 1)
	assert.Equal(t, uint64(2), dps[0].Count)
	assert.Greater(t, dps[0].Sum, 0.0)
	assert.Less(t, dps[0].Sum, 10.0)
}

func ExampleWebhook() {
	var q queue.Enqueuer = &webhookFakeQueue{} // in a program: the audit Queue
	mux := http.NewServeMux()
	// kube-apiserver's --audit-webhook-config-file points at http://<host>/audit/<cluster>.
	New(Config{DefaultCluster: "main"}, Deps{Queue: q, Telemetry: telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}}).Register(mux)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit/prod-eu", strings.NewReader(testBatch)))
	fmt.Print(rec.Code, " ", rec.Body.String())
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit", strings.NewReader(`{"kind":"Foo"}`)))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 200 accepted 2 events
	// 400 decode audit event list: wrong kind "Foo", want EventList
}
