package httpserver

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/telemetry"
)

// TestModuleServesMetrics: with telemetry.Module, Module serves the Prometheus provider at GET
// /metrics on the API listener, behind the API's authentication; without the provider (a meter
// provider of the application's own, or no telemetry.Module) there is no /metrics.
func TestModuleServesMetrics(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second}
	tokens := writeFile(t, t.TempDir(), "tokens", []byte("reader-token\n"))
	start := func(t *testing.T, cfg Config, opts ...fx.Option) *Servers {
		t.Helper()
		var s *Servers
		app := fxtest.New(t, append(opts, Module, fx.Supply(quiet, cfg), fx.Populate(&s), fx.NopLogger)...)
		app.RequireStart()
		t.Cleanup(app.RequireStop)
		return s
	}

	s := start(t, Config{APIAddr: "127.0.0.1:0"}, telemetry.Module)
	code, body := do(t, client, http.MethodGet, "http://"+s.APIAddr()+"/metrics", "", nil, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.Contains(body, "go_goroutines"), "the provider's runtime collector")
	assert.Empty(t, s.AuditAddr(), "/metrics is on the API listener: no audit listener")

	s = start(t, Config{APIAddr: "127.0.0.1:0", APIAuth: APIAuthConfig{TokenFiles: []string{tokens}}}, telemetry.Module)
	code, _ = do(t, client, http.MethodGet, "http://"+s.APIAddr()+"/metrics", "", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, code, "httpAuth covers /metrics")
	code, _ = do(t, client, http.MethodGet, "http://"+s.APIAddr()+"/metrics", "reader-token", nil, nil)
	assert.Equal(t, http.StatusOK, code)

	own := fx.Supply(fx.Annotate(noop.NewMeterProvider(), fx.As(new(metric.MeterProvider))))
	s = start(t, Config{APIAddr: "127.0.0.1:0"}, telemetry.Module, own)
	assert.Empty(t, s.APIAddr(), "a meter provider of the application's own: no /metrics, no API listener")

	s = start(t, Config{APIAddr: "127.0.0.1:0"})
	assert.Empty(t, s.APIAddr(), "without telemetry.Module: no /metrics")
}
