package kelemetrix

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/telemetry"
)

// scrapeMetrics GETs /metrics from the Prometheus provider of telemetry.Module (which
// httpserver.Module serves there).
func scrapeMetrics(t *testing.T, prom *telemetry.Prometheus) string {
	t.Helper()
	rec := httptest.NewRecorder()
	prom.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	body, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestMaxSeriesAboveSDKDefault: with telemetry.Module's provider (the /metrics of the all-in-one
// and of examples/kelemetrix), a metric whose maxSeries is above the SDK's default cardinality
// limit (2000) and that sees more label sets than that exports exactly maxSeries-1 real series
// plus one "other" series, and never the SDK's otel_metric_overflow series.
func TestMaxSeriesAboveSDKDefault(t *testing.T) {
	const maxSeries, users = 2100, 2500
	if maxSeries <= telemetry.DefaultCardinalityLimit {
		t.Fatal("the test needs maxSeries above the SDK's default limit")
	}
	t.Setenv(telemetry.CardinalityEnv, "")
	big := counter("kx_big", tagUser)
	big.MaxSeries = maxSeries
	hist := MetricConfig{Name: "kx_big_latency", Kind: kindHistogram, Quantity: quantityLatency,
		Labels: []string{tagUser}, Buckets: []float64{1}, MaxSeries: maxSeries}
	cfg := Config{Metrics: []MetricConfig{big, hist, counter("kx_small", tagUser)}}

	var proc *Processor
	var prom *telemetry.Prometheus
	app := fxtest.New(t, telemetry.Module, Module, fx.Supply(cfg), fx.Populate(&proc, &prom), fx.NopLogger)
	app.RequireStart()
	defer app.RequireStop()

	var evs []*auditv1.Event
	for i := range users {
		evs = append(evs, req(fmt.Sprintf("user-%04d", i), "get", "pods", 200, time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := proc.EnqueueWait(ctx, "c", evs); err != nil {
		t.Fatal(err)
	}
	if err := proc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	body := scrapeMetrics(t, prom)
	if strings.Contains(body, "otel_metric_overflow") {
		t.Error("the SDK folded series into otel_metric_overflow")
	}
	for _, c := range []struct {
		family         string
		real, otherVal int
	}{
		{"kx_big_total", maxSeries - 1, users - (maxSeries - 1)},
		{"kx_big_latency_seconds_count", maxSeries - 1, users - (maxSeries - 1)},
		// The default maxSeries (1000).
		{"kx_small_total", defaultMaxSeries - 1, users - (defaultMaxSeries - 1)},
	} {
		sample := regexp.MustCompile(`(?m)^` + c.family + `\{([^}]*)\} (\S+)$`)
		real, other := 0, -1
		for _, m := range sample.FindAllStringSubmatch(body, -1) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.Contains(m[1], `user="other"`):
				other = int(v)
			case strings.Contains(m[1], `user="user-`) && v == 1:
				real++
			default:
				t.Errorf("%s{%s} %v: not a series of one user", c.family, m[1], v)
			}
		}
		if real != c.real || other != c.otherVal {
			t.Errorf("%s: %d series of one user and other=%d, want %d and %d", c.family, real, other, c.real, c.otherVal)
		}
	}
	want := fmt.Sprintf(`kelemetry_kelemetrix_series_overflow_total{metric="kx_big"} %d`, users-(maxSeries-1))
	if !strings.Contains(body, want+"\n") {
		t.Errorf("no %q on /metrics", want)
	}
}

// TestCardinalityLimit: the SDK limit that keeps every series is the largest maxSeries plus one
// (the SDK counts its overflow series); none without metrics.
func TestCardinalityLimit(t *testing.T) {
	big := counter("a")
	big.MaxSeries = 5000
	for _, c := range []struct {
		cfg  Config
		want telemetry.CardinalityLimit
	}{
		{Config{}, 0},
		{Config{Metrics: []MetricConfig{counter("a")}}, defaultMaxSeries + 1},
		{Config{MaxSeries: 3000, Metrics: []MetricConfig{counter("a")}}, 3001},
		{Config{MaxSeries: 10, Metrics: []MetricConfig{counter("b"), big}}, 5001},
	} {
		if got := c.cfg.CardinalityLimit(); got != c.want {
			t.Errorf("%+v: CardinalityLimit %d, want %d", c.cfg, got, c.want)
		}
	}
}
