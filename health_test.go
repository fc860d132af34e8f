package kelemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/healthz"
)

// /healthz says "unavailable" with the reason and HTTP 503 while a sink (the store on a full
// disk) cannot take writes, and ok again afterwards.
func TestHealthReportsUnhealthySinks(t *testing.T) {
	var sinkErr error
	h := healthHandler(func() healthz.Body { return healthz.Body{Status: "ok", QueueDepth: 3} },
		func(context.Context) error { return sinkErr })
	get := func() (int, healthz.Body) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body healthz.Body
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		return rec.Code, body
	}
	code, body := get()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body.Status)
	assert.Empty(t, body.Reason)

	sinkErr = errors.New("store unavailable: disk full")
	code, body = get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable", body.Status)
	assert.Contains(t, body.Reason, "disk full")
	assert.Equal(t, 3, body.QueueDepth)

	// Only back-pressured (the OTLP queue full): still 200, so that probes neither restart nor
	// unroute the process, with the reason.
	busy := fmt.Errorf("otlp queue full: %w", aggregator.ErrSinkBusy)
	sinkErr = busy
	code, body = get()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "busy", body.Status)
	assert.Contains(t, body.Reason, "otlp queue full")

	// Busy and a full disk: unavailable.
	sinkErr = errors.Join(busy, errors.New("store unavailable: disk full"))
	code, body = get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable", body.Status)

	sinkErr = nil
	code, body = get()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body.Status)
}
