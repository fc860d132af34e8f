package webhook

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	wt := newWebhookTest(t, Config{})
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
	assert.Contains(t, rec.Body.String(), "items[1].stageTimestamp: 9999-01-01T00:00:00Z is more than 292 years ahead of this receiver's clock (audit.maxFutureSkew 24h)")

	logs := wt.logText()
	assert.Contains(t, logs, "items[1].stageTimestamp: 9999-01-01T00:00:00Z is more than 292 years ahead of this receiver's clock (audit.maxFutureSkew 24h)")
	assert.Contains(t, logs, "items[3].requestReceivedTimestamp: "+future)
	assert.Contains(t, logs, "ahead of this receiver's clock (audit.maxFutureSkew 24h)")
	assert.Contains(t, logs, "items[4].requestReceivedTimestamp: 1600-01-01T00:00:00Z is outside")

	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 1, "future_time": 2}, c["kelemetry.audit.webhook.dropped_events"])
	assert.Equal(t, map[string]int64{"": 2}, c["kelemetry.audit.webhook.events"])
	assert.Empty(t, c["kelemetry.audit.webhook.rejected"])
}

func TestWebhookAllBadTimestamps(t *testing.T) {
	wt := newWebhookTest(t, Config{})
	body := timedBatch(timedItem("a", "", "1600-01-01T00:00:00Z"), timedItem("b", "", "1677-12-31T23:59:59Z"))
	rec := wt.post("/audit/c1", strings.NewReader(body), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "items[0].stageTimestamp: 1600-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)")
	assert.Empty(t, wt.q.recorded())
	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 2}, c["kelemetry.audit.webhook.dropped_events"])
	assert.Equal(t, map[string]int64{"bad_timestamp": 1}, c["kelemetry.audit.webhook.rejected"])
}

// An item stamped 0001-01-01 (the zero time, as an absent or null timestamp decodes) cannot be
// placed in time: the webhook drops it up front with the reason and message of other
// unrepresentable times, instead of answering "accepted" and the consumer dropping it later.
func TestWebhookRefusesZeroTimestamps(t *testing.T) {
	good := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	const zero = "0001-01-01T00:00:00Z"
	const want = "stageTimestamp: 0001-01-01T00:00:00Z is outside the representable range (years 1678 to 2261), as is requestReceivedTimestamp (absent, null or zero)"

	wt := newWebhookTest(t, Config{})
	rec := wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("zero", zero, zero))), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Equal(t, "all 1 events have bad timestamps: items[0]."+want+"\n", rec.Body.String())
	assert.Empty(t, wt.q.recorded())
	c := wt.counters(t)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 1}, c["kelemetry.audit.webhook.dropped_events"])
	assert.Equal(t, map[string]int64{"bad_timestamp": 1}, c["kelemetry.audit.webhook.rejected"])

	// In a batch with good items: dropped and named, the rest queued. Absent timestamps are the
	// same zero time; one good timestamp of the two is enough (the consumer uses it for both).
	wt = newWebhookTest(t, Config{})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(
		timedItem("ok", good, good), timedItem("zero", zero, zero), timedItem("none", "", ""),
		timedItem("stageOnly", zero, good))), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "accepted 2 events, dropped 2 with bad timestamps: items[1]."+want+"; items[2]."+want)
	batches := wt.q.recorded()
	require.Len(t, batches, 1)
	var ids []string
	for _, ev := range batches[0].events {
		ids = append(ids, ev.AuditID)
	}
	assert.Equal(t, []string{"ok", "stageOnly"}, ids)
	assert.Equal(t, map[string]int64{"unrepresentable_time": 2}, wt.counters(t)["kelemetry.audit.webhook.dropped_events"])
}

// A time beyond the future skew that is also beyond the representable range (2262-01-01) is
// refused for the rule it breaks first, stated in the answer: too far ahead by
// audit.maxFutureSkew, not "outside the range 1678-2262", which 2262-01-01 seems to be inside of.
func TestWebhookFarFutureStatesSkew(t *testing.T) {
	wt := newWebhookTest(t, Config{})
	rec := wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("y2262", "", "2262-01-01T00:00:00Z"))), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Regexp(t, `^all 1 events have bad timestamps: items\[0\]\.stageTimestamp: 2262-01-01T00:00:00Z is [0-9hms]+ ahead of this receiver's clock \(audit\.maxFutureSkew 24h\)\n$`, rec.Body.String())
	assert.NotContains(t, rec.Body.String(), "1678")
	assert.Equal(t, map[string]int64{"future_time": 1}, wt.counters(t)["kelemetry.audit.webhook.dropped_events"])

	// With the skew check off, the range is the rule, and its message names the last year.
	wt = newWebhookTest(t, Config{MaxFutureSkew: -1})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("y2262", "", "2262-01-01T00:00:00Z"))), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "items[0].stageTimestamp: 2262-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)")
}

func TestWebhookFutureSkewConfig(t *testing.T) {
	ahead := time.Now().UTC().Add(48 * time.Hour).Format(time.RFC3339Nano)
	// Off: a negative skew accepts any representable time.
	wt := newWebhookTest(t, Config{MaxFutureSkew: -1})
	rec := wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Len(t, wt.q.recorded(), 1)
	// Wider than the default.
	wt = newWebhookTest(t, Config{MaxFutureSkew: 72 * time.Hour})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Len(t, wt.q.recorded(), 1)
	// Default 24h.
	wt = newWebhookTest(t, Config{})
	rec = wt.post("/audit/c1", strings.NewReader(timedBatch(timedItem("a", ahead, ahead))), nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
}
