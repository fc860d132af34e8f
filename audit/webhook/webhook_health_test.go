package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// failingBody fails the test's expectation if the webhook reads it.
type failingBody struct{ read atomic.Bool }

func (b *failingBody) Read([]byte) (int, error) {
	b.read.Store(true)
	return 0, io.EOF
}

// While the sinks are unhealthy (the store's disk is full) the webhook answers 503 with
// Retry-After and the reason, without reading the body, so kube-apiserver retries later.
func TestWebhookUnavailableWhileSinksUnhealthy(t *testing.T) {
	q := &webhookFakeQueue{}
	var unhealthy atomic.Bool
	w := New(Config{DefaultCluster: "c"}, Deps{Queue: q, Telemetry: telemetry.Settings{Logger: slog.New(slog.DiscardHandler)},
		Health: func(context.Context) error {
			if unhealthy.Load() {
				return errors.New("store unavailable: disk full")
			}
			return nil
		}})
	mux := http.NewServeMux()
	w.Register(mux)

	unhealthy.Store(true)
	body := &failingBody{}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit", body))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), "disk full")
	assert.False(t, body.read.Load(), "the body is not read")
	assert.Empty(t, q.recorded())

	unhealthy.Store(false)
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit",
		strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// A sink that is only back-pressured (aggregator.ErrSinkBusy: the OTLP queue is full) makes the
// webhook answer 429 with Retry-After, like its own full queue; with another sink also
// unavailable it stays 503.
func TestWebhookTooManyRequestsWhileSinkBusy(t *testing.T) {
	q := &webhookFakeQueue{}
	var health atomic.Value
	w := New(Config{DefaultCluster: "c"}, Deps{Queue: q, Telemetry: telemetry.Settings{Logger: slog.New(slog.DiscardHandler)},
		Health: func(context.Context) error {
			err, _ := health.Load().(error)
			return err
		}})
	mux := http.NewServeMux()
	w.Register(mux)
	post := func() (*httptest.ResponseRecorder, *failingBody) {
		body := &failingBody{}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit", body))
		return rec, body
	}

	busy := fmt.Errorf("otlpsink: 20 spans queued: %w", aggregator.ErrSinkBusy)
	health.Store(fmt.Errorf("aggregator: sink unhealthy: %w", errors.Join(busy)))
	rec, body := post()
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, webhookRetryAfter, rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), "20 spans queued")
	assert.False(t, body.read.Load(), "the body is not read")

	health.Store(fmt.Errorf("aggregator: sink unhealthy: %w", errors.Join(busy, errors.New("store unavailable: disk full"))))
	rec, _ = post()
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a full disk wins")
	assert.Empty(t, q.recorded())
}
