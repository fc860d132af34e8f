package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/internal/repeats"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/fixture"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyOther decodes the fixture's first batch and returns it with the events whose index is odd
// marked to skip.
func skipOdd(t *testing.T, data []byte) (all []*auditv1.Event, skip func([]byte, string) bool) {
	t.Helper()
	all, err := auditv1.DecodeEventList(data)
	require.NoError(t, err)
	odd := map[string]bool{}
	for i, ev := range all {
		if i%2 == 1 {
			odd[ev.AuditID+"/"+ev.Stage] = true
		}
	}
	return all, func(id []byte, stage string) bool { return odd[string(id)+"/"+stage] }
}

func TestRepeatSetBounded(t *testing.T) {
	forgotten := 0
	s := repeats.NewSet(4, func(n int) { forgotten += n })
	evs := func(ids ...string) []*auditv1.Event {
		out := make([]*auditv1.Event, len(ids))
		for i, id := range ids {
			out[i] = &auditv1.Event{AuditID: id, Stage: "ResponseComplete"}
		}
		return out
	}
	s.Add("c", evs("a", "b"))
	kept, n := s.Filter("c", evs("a", "x", "b"))
	assert.Equal(t, 2, n)
	assert.Equal(t, evs("x"), kept)
	kept, n = s.Filter("other", evs("a"))
	assert.Zero(t, n, "another cluster's event of the same audit ID is not a repeat")
	assert.Len(t, kept, 1)

	s.Add("c", evs("c", "d")) // the window (4) holds a to d
	assert.Zero(t, forgotten)
	s.Add("c", evs("e")) // a and b are forgotten
	assert.Equal(t, 2, forgotten)
	_, n = s.Filter("c", evs("a", "b", "c", "d", "e"))
	assert.Equal(t, 3, n)
}

// TestWebhookQueuesARepeatOnce: a batch posted again (the answer was lost and kube-apiserver
// retried) is answered 200 but its events are not queued again; a batch that overlaps queues
// only what is new; a batch the queue refused is not remembered, so its retry is queued.
func TestWebhookQueuesARepeatOnce(t *testing.T) {
	batches := fixture.Lines(t, "rollout", "webhook-batches.jsonl")
	first, err := auditv1.DecodeEventList(batches[0])
	require.NoError(t, err)
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})

	rec := wt.post("/audit", bytes.NewReader(batches[0]), nil)
	require.Equal(t, http.StatusOK, rec.Code)
	rec = wt.post("/audit", bytes.NewReader(batches[0]), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), fmt.Sprintf("accepted 0 events, %d repeated events were queued before", len(first)))
	require.Len(t, wt.q.recorded(), 1)
	assert.Equal(t, first, wt.q.recorded()[0].events)
	// The same events in other bytes (not the body seen before) are found one by one.
	rec = wt.post("/audit", bytes.NewReader(append(append([]byte(nil), batches[0]...), '\n', ' ')), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), fmt.Sprintf("accepted 0 events, %d repeated events were queued before", len(first)))
	require.Len(t, wt.q.recorded(), 1)

	// Another cluster's batch with the same audit IDs is not a repeat.
	require.Equal(t, http.StatusOK, wt.post("/audit/other", bytes.NewReader(batches[0]), nil).Code)
	require.Len(t, wt.q.recorded(), 2)

	// A refused batch is not remembered: its retry is queued.
	wt.q.err = fmt.Errorf("partition 1: %w", queue.ErrFull)
	require.Equal(t, http.StatusTooManyRequests, wt.post("/audit", bytes.NewReader(batches[1]), nil).Code)
	wt.q.err = nil
	require.Equal(t, http.StatusOK, wt.post("/audit", bytes.NewReader(batches[1]), nil).Code)
	require.Len(t, wt.q.recorded(), 3)
	second, err := auditv1.DecodeEventList(batches[1])
	require.NoError(t, err)
	assert.Equal(t, second, wt.q.recorded()[2].events)

	// A batch that overlaps the first: only its new events are queued, in order.
	mixed := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		`{"auditID":"new-1","stage":"ResponseComplete","verb":"get","stageTimestamp":"2026-11-29T17:09:30Z"},` +
		`{"auditID":"` + first[0].AuditID + `","stage":"` + first[0].Stage + `","verb":"get"},` +
		`{"auditID":"new-2","stage":"ResponseComplete","verb":"get","stageTimestamp":"2026-11-29T17:09:31Z"}]}`)
	rec = wt.post("/audit", bytes.NewReader(mixed), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Contains(t, rec.Body.String(), "accepted 2 events, 1 repeated events were queued before")
	got := wt.q.recorded()
	require.Len(t, got, 4)
	require.Len(t, got[3].events, 2)
	assert.Equal(t, "new-1", got[3].events[0].AuditID)
	assert.Equal(t, "new-2", got[3].events[1].AuditID)

	c := wt.counters(t)
	assert.Equal(t, int64(2*len(first)+1), c["kelemetry.audit.webhook.repeated_events"][""])
	assert.Equal(t, int64(2*len(first)+len(second)+2), c["kelemetry.audit.webhook.events"][""])
}

func TestWebhookRepeatCheckOff(t *testing.T) {
	batch := fixture.Lines(t, "rollout", "webhook-batches.jsonl")[0]
	wt := newWebhookTest(t, Config{DefaultCluster: "c", RepeatWindow: -1})
	for range 2 {
		require.Equal(t, http.StatusOK, wt.post("/audit", bytes.NewReader(batch), nil).Code)
	}
	assert.Len(t, wt.q.recorded(), 2)
}

// tapRecorder is a BatchTap that records how many events of each batch it was shown.
type tapRecorder struct{ events []int }

func (r *tapRecorder) Accepted(_ context.Context, b AcceptedBatch) {
	r.events = append(r.events, b.Events)
}

// TestWebhookRepeatsStillReachTaps: a dump or forward tap sees every accepted batch as before
// (what it does with a repeat is its receiver's business); only the queue is spared.
func TestWebhookRepeatsStillReachTaps(t *testing.T) {
	batch := fixture.Lines(t, "rollout", "webhook-batches.jsonl")[0]
	n := len(mustDecodeList(t, batch))
	tap := &tapRecorder{}
	wt := newWebhookTest(t, Config{DefaultCluster: "c"}, tap)
	for range 2 {
		require.Equal(t, http.StatusOK, wt.post("/audit", bytes.NewReader(batch), nil).Code)
	}
	assert.Equal(t, []int{n, n}, tap.events)
	assert.Len(t, wt.q.recorded(), 1)
	assert.Equal(t, int64(n), wt.counters(t)["kelemetry.audit.webhook.repeated_events"][""])
}

func mustDecodeList(t *testing.T, data []byte) []*auditv1.Event {
	t.Helper()
	evs, err := auditv1.DecodeEventList(data)
	require.NoError(t, err)
	return evs
}

// TestWebhookRemembersOnlyWholeBodies: a body with an event dropped for its timestamp is not
// answered from the body memory (the event may be accepted later); its queued events still are
// repeats.
func TestWebhookRemembersOnlyWholeBodies(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c", MaxFutureSkew: time.Hour})
	future := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339Nano)
	body := []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
		`{"auditID":"ok","stage":"ResponseComplete","verb":"get","stageTimestamp":"2026-11-29T17:09:30Z"},` +
		`{"auditID":"later","stage":"ResponseComplete","verb":"get","stageTimestamp":"` + future + `"}]}`)
	for i := range 2 {
		rec := wt.post("/audit", bytes.NewReader(body), nil)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Body.String(), "dropped 1 with bad timestamps", "post %d: checked again", i)
	}
	require.Len(t, wt.q.recorded(), 1, "the good event is queued once")
	assert.Equal(t, "ok", wt.q.recorded()[0].events[0].AuditID)
}

// TestWebhookReusesOnlyUnreferencedBodies posts bodies of one pool class in an order that gives
// a wrongly recycled buffer to the next body: the events queued from a body must keep their bytes.
func TestWebhookReusesOnlyUnreferencedBodies(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	body := func(id string, fill byte) []byte {
		pad := strings.Repeat(string(fill), 40<<10)
		return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` +
			`{"auditID":"` + id + `","stage":"ResponseComplete","verb":"create","stageTimestamp":"2026-11-29T17:09:30Z",` +
			`"objectRef":{"resource":"configmaps","namespace":"default","name":"` + id + `","apiVersion":"v1"},` +
			`"requestObject":{"data":{"x":"` + pad + `"}}}]}`)
	}
	want := map[string][]byte{}
	queue := func(id string, fill byte) {
		b := body(id, fill)
		rec := wt.post("/audit", bytes.NewReader(b), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Contains(t, rec.Body.String(), "accepted 1 events")
		evs, err := auditv1.DecodeEventList(b)
		require.NoError(t, err)
		want[id] = append([]byte(nil), evs[0].RequestObject...)
	}
	queue("a", 'a')
	for i := range 3 {
		// A whole repeat, the same event in other bytes, a malformed body: all three leave their
		// buffers unreferenced; the next good body may get one of them.
		rec := wt.post("/audit", bytes.NewReader(body("a", 'a')), nil)
		require.Contains(t, rec.Body.String(), "accepted 0 events, 1 repeated")
		rec = wt.post("/audit", bytes.NewReader(append(body("a", 'a'), ' ')), nil)
		require.Contains(t, rec.Body.String(), "accepted 0 events, 1 repeated")
		bad := body("bad", 'z')
		rec = wt.post("/audit", bytes.NewReader(bad[:len(bad)-3]), nil)
		require.Equal(t, http.StatusBadRequest, rec.Code)
		queue(fmt.Sprintf("b%d", i), byte('b'+i))
	}
	got := 0
	for _, b := range wt.q.recorded() {
		for _, ev := range b.events {
			assert.Equal(t, string(want[ev.AuditID]), string(ev.RequestObject), ev.AuditID)
			got++
		}
	}
	assert.Equal(t, 4, got)
}

// The repeat check's counters are exported at 0 from the start.
func TestWebhookRepeatCountersStartAtZero(t *testing.T) {
	wt := newWebhookTest(t, Config{DefaultCluster: "c"})
	for _, name := range []string{"kelemetry.audit.webhook.repeated_events", "kelemetry.audit.webhook.repeat_evictions",
		"kelemetry.audit.webhook.repeat_body_evictions", "kelemetry.audit.webhook.events"} {
		assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, wt.reader, name), name)
	}
	off := newWebhookTest(t, Config{DefaultCluster: "c", RepeatWindow: -1})
	assert.Equal(t, telemetrytest.Zeros(""), telemetrytest.Points(t, off.reader, "kelemetry.audit.webhook.repeated_events"))
	assert.Empty(t, telemetrytest.Points(t, off.reader, "kelemetry.audit.webhook.repeat_evictions"), "no repeat check, no evictions")
}
