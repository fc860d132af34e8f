package httpserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kelemetry/kelemetry/health"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
)

func TestReadyz(t *testing.T) {
	var queueErr error
	m := http.NewServeMux()
	readyz{checks: []health.Check{
		{Name: "sinks", Func: func(context.Context) error { return nil }},
		{Name: "audit-queue", Func: func(context.Context) error { return queueErr }},
	}}.register(m)
	get := func(path string, anon bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if anon {
			r = anonymous(r)
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		return rec
	}

	rec := get("/readyz", false)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "ok\n", rec.Body.String())
	rec = get("/readyz?verbose", false)
	assert.Equal(t, "[+]audit-queue ok\n[+]sinks ok\nreadyz check passed\n", rec.Body.String(), "every check by name, in order")

	queueErr = errors.New("durable: write audit-queue/00000001.log: no space left on device")
	rec = get("/readyz", false)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "[-]audit-queue failed: durable: write audit-queue/00000001.log: no space left on device\n[+]sinks ok\nreadyz check failed\n", rec.Body.String())
	rec = get("/readyz", true)
	assert.Equal(t, "[-]audit-queue failed\n[+]sinks ok\nreadyz check failed\n", rec.Body.String(), "no reasons without credentials")
	rec = get("/readyz?exclude=audit-queue", false)
	assert.Equal(t, http.StatusOK, rec.Code, "an excluded check does not count")

	rec = get("/readyz/audit-queue", false)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "failed: durable: write")
	rec = get("/readyz/sinks", false)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "ok\n", rec.Body.String())
	rec = get("/readyz/nope", false)
	assert.Equal(t, http.StatusNotFound, rec.Code)
}

func TestReadyzChecksValidated(t *testing.T) {
	ok := func(context.Context) error { return nil }
	_, err := New(Config{APIAddr: "127.0.0.1:0", AuditAddr: "127.0.0.1:0"}, Deps{
		Ready: []health.Check{{Name: "a", Func: ok}, {Name: "a", Func: ok}}})
	assert.ErrorContains(t, err, "registered twice")
}

// The readiness checks are exported as kelemetry.ready, 1 while a check passes and 0 while it
// fails, until the servers stop.
func TestReadyGauge(t *testing.T) {
	mp, reader := meter(t)
	var queueErr error
	srv, err := New(Config{APIAddr: "127.0.0.1:0", AuditAddr: "127.0.0.1:0"}, Deps{Meter: Meter{Provider: mp},
		Ready: []health.Check{
			{Name: "sinks", Func: func(context.Context) error { return nil }},
			{Name: "audit-queue", Func: func(context.Context) error { return queueErr }},
		}})
	if err != nil {
		t.Fatal(err)
	}
	assert.Equal(t, map[string]int64{"sinks": 1, "audit-queue": 1}, telemetrytest.Int64By(t, reader, "kelemetry.ready", "check"))
	queueErr = errors.New("full")
	assert.Equal(t, map[string]int64{"sinks": 1, "audit-queue": 0}, telemetrytest.Int64By(t, reader, "kelemetry.ready", "check"))
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	assert.Empty(t, telemetrytest.Int64By(t, reader, "kelemetry.ready", "check"), "unregistered at stop")
}
