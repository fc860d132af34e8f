package webhook

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// bigBatch is a valid batch of at least size bytes, stamped now.
func bigBatch(size int) ([]byte, int) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var items []string
	n := 0
	for total := 0; total < size; n++ {
		it := timedItem("id-"+strconv.Itoa(n), now, now)
		items = append(items, it)
		total += len(it) + 1
	}
	return []byte(timedBatch(items...)), n
}

func TestWebhookInflightBytesBound(t *testing.T) {
	body, n := bigBatch(900 << 10)
	const limit = 3 << 20
	cfg := Config{MaxBodyBytes: 1 << 20, MaxInflightBytes: limit}
	require.NoError(t, cfg.Validate())
	q := &webhookFakeQueue{entered: make(chan struct{}, 100), release: make(chan struct{})}
	reader := sdkmetric.NewManualReader()
	var logs logtest.Buffer
	w := New(cfg, Deps{Queue: q, Telemetry: telemetry.Settings{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	mux := http.NewServeMux()
	w.Register(mux)
	wt := &webhookTest{reader: reader}

	post := func(chunked bool) int {
		var req *http.Request
		if chunked {
			req = httptest.NewRequest(http.MethodPost, "/audit/c1", onlyReader{bytes.NewReader(body)})
			req.ContentLength = -1
		} else {
			req = httptest.NewRequest(http.MethodPost, "/audit/c1", bytes.NewReader(body))
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			assert.Equal(t, "1", rec.Header().Get("Retry-After"))
			assert.Contains(t, rec.Body.String(), "maxInflightBytes")
		}
		return rec.Code
	}

	// 30 posts at once, with and without Content-Length; accepted ones hold their bytes in
	// Enqueue until released, so that later ones find the budget spent.
	const posts = 30
	codes := make(chan int, posts)
	var wg sync.WaitGroup
	for i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- post(i%3 == 0)
		}()
	}
	// Every post either enters Enqueue or is answered 429 while the others hold their bytes.
	entered, tooMany := 0, 0
	timeout := time.After(20 * time.Second)
	for entered+tooMany < posts {
		select {
		case <-q.entered:
			entered++
		case code := <-codes:
			require.Equal(t, http.StatusTooManyRequests, code)
			tooMany++
		case <-timeout:
			t.Fatalf("stuck: %d entered, %d answered 429", entered, tooMany)
		}
	}
	close(q.release)
	wg.Wait()
	close(codes)
	for code := range codes {
		assert.Equal(t, http.StatusOK, code)
	}

	assert.GreaterOrEqual(t, entered, 1)
	assert.LessOrEqual(t, entered, 3, "at most 3 bodies of 900 KiB fit in 3 MiB")
	assert.Positive(t, tooMany)
	assert.LessOrEqual(t, w.inflight.peak, int64(limit), "accounted in-flight bytes over the bound")
	assert.Zero(t, w.inflight.inUse(), "bytes not given back")

	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"inflight_bytes": int64(tooMany)}, c["kelemetry.audit.webhook.rejected"])
	assert.Empty(t, c["kelemetry.audit.webhook.dropped_events"], "a 429'd batch is not dropped: the sender retries it")
	assert.Equal(t, map[string]int64{"": int64(entered * n)}, c["kelemetry.audit.webhook.events"])
	assert.Equal(t, map[string]int64{"": 0}, c["kelemetry.audit.webhook.inflight_bytes"])
	assert.Len(t, q.recorded(), entered)

	// With the budget free again, a post goes through.
	q.entered = nil
	assert.Equal(t, http.StatusOK, post(false))
	assert.Equal(t, http.StatusOK, post(true))
}

func TestWebhookInflightConfig(t *testing.T) {
	d := Config{}.WithDefaults()
	assert.Equal(t, int64(2*defaultWebhookMaxBodyBytes), d.MaxInflightBytes)
	assert.Equal(t, int64(8<<20), Config{MaxBodyBytes: 4 << 20}.WithDefaults().MaxInflightBytes)
	require.Error(t, Config{MaxBodyBytes: 4 << 20, MaxInflightBytes: 1 << 20}.Validate())
	require.NoError(t, Config{MaxBodyBytes: 4 << 20, MaxInflightBytes: 4 << 20}.Validate())
}

// failReader fails the test when read.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("body read although its Content-Length did not fit")
	return 0, io.EOF
}

func TestWebhookInflightRefusesBeforeReading(t *testing.T) {
	q := &webhookFakeQueue{}
	w := New(Config{DefaultCluster: "c1", MaxBodyBytes: 1000, MaxInflightBytes: 1000}, Deps{Queue: q, Telemetry: quietSettings()})
	require.True(t, w.inflight.tryAcquire(900)) // another request holds most of the budget
	req := httptest.NewRequest(http.MethodPost, "/audit/c1", failReader{t})
	req.ContentLength = 500
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, int64(900), w.inflight.inUse())
	w.inflight.release(900)
	assert.Empty(t, q.recorded())
}

func quietSettings() telemetry.Settings {
	return telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}
}
