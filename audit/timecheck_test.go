package audit

import (
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/logtest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// timedItem is a webhook batch item with audit ID id and the given timestamps ("" leaves one out).
func timedItem(id, received, stage string) string {
	s := `{"level":"Metadata","auditID":"` + id + `","stage":"ResponseComplete","verb":"create","user":{"username":"admin"},` +
		`"objectRef":{"resource":"pods","namespace":"default","name":"p1","apiVersion":"v1"},"responseStatus":{"code":201}`
	if received != "" {
		s += `,"requestReceivedTimestamp":"` + received + `"`
	}
	if stage != "" {
		s += `,"stageTimestamp":"` + stage + `"`
	}
	return s + "}"
}

func timedBatch(items ...string) string {
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[` + strings.Join(items, ",") + `]}`
}

func TestWebhookDropsBadTimestamps(t *testing.T) {
	good := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	future := time.Now().UTC().Add(720 * time.Hour).Format(time.RFC3339Nano)
	wt := newWebhookTest(t, WebhookConfig{})
	body := timedBatch(
		timedItem("ok1", good, good),
		timedItem("y9999", good, "9999-01-01T00:00:00Z"),
		timedItem("ok2", "", good),
		timedItem("future", future, future),
		timedItem("y1600", "1600-01-01T00:00:00Z", good),
	)
	rec := wt.post("/audit/c1", strings.NewReader(body), nil)
	// The good items are kept (a 400 would lose them: kube-apiserver does not retry it).
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	batches := wt.q.recorded()
	require.Len(t, batches, 1)
	var ids []string
	for _, ev := range batches[0].events {
		ids = append(ids, ev.AuditID)
	}
	assert.Equal(t, []string{"ok1", "ok2"}, ids)
	assert.Contains(t, rec.Body.String(), "dropped 3")
	assert.Contains(t, rec.Body.String(), "items[1].stageTimestamp: 9999-01-01T00:00:00Z is outside the representable range 1678-2262")

	logs := wt.logText()
	assert.Contains(t, logs, "items[1].stageTimestamp: 9999-01-01T00:00:00Z is outside the representable range 1678-2262")
	assert.Contains(t, logs, "items[3].requestReceivedTimestamp: "+future)
	assert.Contains(t, logs, "ahead of this receiver's clock (audit.maxFutureSkew 24h)")
	assert.Contains(t, logs, "items[4].requestReceivedTimestamp: 1600-01-01T00:00:00Z is outside")

	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 2, "future_time": 1}, c["kelemetry.audit.webhook.dropped_events"])
	assert.Equal(t, map[string]int64{"": 2}, c["kelemetry.audit.webhook.events"])
	assert.Empty(t, c["kelemetry.audit.webhook.rejected"])
}

func TestWebhookAllBadTimestamps(t *testing.T) {
	wt := newWebhookTest(t, WebhookConfig{})
	body := timedBatch(timedItem("a", "", "2300-01-01T00:00:00Z"), timedItem("b", "", "9999-01-01T00:00:00Z"))
	rec := wt.post("/audit/c1", strings.NewReader(body), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "items[0].stageTimestamp: 2300-01-01T00:00:00Z is outside the representable range 1678-2262")
	assert.Empty(t, wt.q.recorded())
	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 2}, c["kelemetry.audit.webhook.dropped_events"])
	assert.Equal(t, map[string]int64{"bad_timestamp": 1}, c["kelemetry.audit.webhook.rejected"])
}

func TestWebhookFutureSkewConfig(t *testing.T) {
	ahead := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339Nano)
	// Off: a negative skew accepts any representable time.
	wt := newWebhookTest(t, WebhookConfig{MaxFutureSkew: -1})
	rec := wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Len(t, wt.q.recorded(), 1)
	// Wider than the default.
	wt = newWebhookTest(t, WebhookConfig{MaxFutureSkew: 72 * time.Hour})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Len(t, wt.q.recorded(), 1)
	// Default 24h.
	wt = newWebhookTest(t, WebhookConfig{})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
}

func TestLogReplayDropsBadTimestamps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	bad := strings.Replace(logLine("y9999"), `"stageTimestamp":"2026-11-29T17:09:30.005000Z"`, `"stageTimestamp":"9999-01-01T00:00:00Z"`, 1)
	future := time.Now().UTC().Add(720 * time.Hour).Format(time.RFC3339Nano)
	fut := strings.Replace(logLine("future"), `"requestReceivedTimestamp":"2026-11-29T17:09:30.000000Z"`, `"requestReceivedTimestamp":"`+future+`"`, 1)
	require.NotEqual(t, logLine("y9999"), bad)
	require.NoError(t, os.WriteFile(path, []byte(logLine("a")+bad+fut+logLine("b")), 0o600))
	var c collector
	var buf logtest.Buffer
	stats, err := ReplayFile(t.Context(), path, "kind", &c, telemetry.Settings{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.IDs())
	assert.Equal(t, int64(4), stats.Lines)
	assert.Equal(t, int64(2), stats.Events)
	assert.Equal(t, int64(2), stats.DroppedEvents)
	assert.Equal(t, int64(0), stats.BadLines)
	logs := buf.String()
	assert.Contains(t, logs, "line 2: stageTimestamp: 9999-01-01T00:00:00Z is outside the representable range 1678-2262")
	assert.Contains(t, logs, "line 3: requestReceivedTimestamp: "+future)
}

// TestConsumerRefusesUnrepresentableTimes: events that reach the queue without a receiver's
// check (a Queue fed by code of one's own) are refused by the consumer, not stored at a wrong time.
func TestConsumerRefusesUnrepresentableTimes(t *testing.T) {
	c := newTestConsumer(t, ConsumerConfig{})
	ev := consumerEvent()
	ev.StageTimestamp = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	_, _, err := c.Convert("c1", ev)
	require.ErrorIs(t, err, aggregator.ErrInvalidEvent)
	require.ErrorIs(t, err, aggregator.ErrTimeUnrepresentable)
	assert.Contains(t, err.Error(), "stageTimestamp: 9999-01-01T00:00:00Z is outside the representable range 1678-2262")
	// The consumer does not apply the receivers' future skew.
	ev = consumerEvent()
	ev.StageTimestamp = time.Now().Add(720 * time.Hour)
	_, keep, err := c.Convert("c1", ev)
	require.NoError(t, err)
	assert.True(t, keep)
}
