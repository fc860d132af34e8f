package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/kelemetry/kelemetry/internal/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

func TestSDKCardinalityLimit(t *testing.T) {
	t.Setenv(CardinalityEnv, "")
	assert.Equal(t, DefaultCardinalityLimit, sdkCardinalityLimit())
	assert.Equal(t, DefaultCardinalityLimit, sdkCardinalityLimit(0, 1001), "never below the SDK's default")
	assert.Equal(t, 3001, sdkCardinalityLimit(1001, 3001, 2001), "the largest need")
	t.Setenv(CardinalityEnv, "5000")
	assert.Equal(t, 5000, sdkCardinalityLimit(3001), "the SDK's variable, when larger")
	assert.Equal(t, 6001, sdkCardinalityLimit(6001))
	t.Setenv(CardinalityEnv, "100")
	assert.Equal(t, 3001, sdkCardinalityLimit(3001), "a smaller variable does not cut below the need")
	t.Setenv(CardinalityEnv, "0")
	assert.Zero(t, sdkCardinalityLimit(3001), "no limit stays no limit")
	t.Setenv(CardinalityEnv, "junk")
	assert.Equal(t, DefaultCardinalityLimit, sdkCardinalityLimit())
}

// seriesOnMetrics records n attribute sets in one counter of Module's provider (with the given
// needs) and returns the /metrics exposition.
func seriesOnMetrics(t *testing.T, n int, need ...CardinalityLimit) string {
	t.Helper()
	res, err := newModule(moduleParams{Cardinality: need})
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Prometheus.Shutdown(context.Background()) })
	c, err := res.Settings.MeterProvider.Meter("test").Int64Counter("many")
	require.NoError(t, err)
	for i := range n {
		c.Add(context.Background(), 1, metric.WithAttributes(attribute.String("k", fmt.Sprint(i))))
	}
	rec := httptest.NewRecorder()
	res.Prometheus.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

// TestModuleCardinality: Module's provider keeps the series its CardinalityGroup asks for, and
// keeps the SDK's default otherwise.
func TestModuleCardinality(t *testing.T) {
	t.Setenv(CardinalityEnv, "")
	series := regexp.MustCompile(`(?m)^many_total\{k="\d+"\} 1$`)
	body := seriesOnMetrics(t, 2500)
	assert.Len(t, series.FindAllString(body, -1), DefaultCardinalityLimit-1)
	assert.True(t, strings.Contains(body, `many_total{otel_metric_overflow="true"} 501`), "the SDK's default applies")

	body = seriesOnMetrics(t, 2500, 100, 2501)
	assert.Len(t, series.FindAllString(body, -1), 2500)
	assert.False(t, strings.Contains(body, "otel_metric_overflow"), "2501 keeps 2500 series")
}

// target_info names the service kelemetry and its version; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES still win, as in any OpenTelemetry SDK.
func TestPrometheusServiceResource(t *testing.T) {
	scrape := func() string {
		p, err := NewPrometheus()
		require.NoError(t, err)
		defer func() { _ = p.Shutdown(context.Background()) }()
		rec := httptest.NewRecorder()
		p.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	out := scrape()
	assert.Contains(t, out, `service_name="kelemetry"`)
	assert.Contains(t, out, `service_version="`+version.Get().Version+`"`)
	assert.Contains(t, out, `telemetry_sdk_language="go"`)

	t.Setenv("OTEL_SERVICE_NAME", "tracer-prod")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
	out = scrape()
	assert.Contains(t, out, `service_name="tracer-prod"`)
	assert.Contains(t, out, `deployment_environment="prod"`)
}
