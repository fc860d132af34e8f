package audit

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// everyOther decodes the fixture's first batch and returns it with the events whose index is odd
// marked to skip.
func skipOdd(t *testing.T, data []byte) (all []*Event, skip func([]byte, string) bool) {
	t.Helper()
	all, err := DecodeEventList(data)
	require.NoError(t, err)
	odd := map[string]bool{}
	for i, ev := range all {
		if i%2 == 1 {
			odd[ev.AuditID+"/"+ev.Stage] = true
		}
	}
	return all, func(id []byte, stage string) bool { return odd[string(id)+"/"+stage] }
}

func TestDecodeSkippingLeavesOutOnlyWhatSkipSays(t *testing.T) {
	for _, scenario := range []string{"rollout", "bulk"} {
		for bi, data := range readFixtureLines(t, scenario, "webhook-batches.jsonl")[:5] {
			all, skip := skipOdd(t, data)
			got, n, err := decodeEventListSkipping(data, skip)
			require.NoError(t, err)
			var want []*Event
			for i, ev := range all {
				if i%2 == 0 {
					want = append(want, ev)
				}
			}
			assert.Equal(t, len(all)-len(want), n, "%s batch %d", scenario, bi)
			assert.Equal(t, want, got, "%s batch %d: the kept events decode as without skipping", scenario, bi)
		}
	}
}

func TestDecodeSkippingEdges(t *testing.T) {
	skipA1 := func(id []byte, stage string) bool { return string(id) == "a1" && stage == "ResponseComplete" }
	list := func(items ...string) []byte {
		return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
	}
	t.Run("audit ID repeated after the check: the last one wins", func(t *testing.T) {
		evs, n, err := decodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","verb":"get","auditID":"a2"}`), skipA1)
		require.NoError(t, err)
		assert.Zero(t, n)
		require.Len(t, evs, 1)
		assert.Equal(t, "a2", evs[0].AuditID)
		assert.Equal(t, "get", evs[0].Verb)
	})
	t.Run("stage after other members", func(t *testing.T) {
		evs, n, err := decodeEventListSkipping(list(`{"auditID":"a1","verb":"get","requestURI":"/x","stage":"ResponseComplete","user":{"username":"u"}}`,
			`{"auditID":"a1","verb":"get","stage":"ResponseStarted"}`), skipA1)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		require.Len(t, evs, 1)
		assert.Equal(t, "ResponseStarted", evs[0].Stage)
		assert.Equal(t, "a1", evs[0].AuditID)
	})
	t.Run("a skipped item is still checked for syntax", func(t *testing.T) {
		_, _, err := decodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","requestObject":{"a":]}`), skipA1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "items[0]")
	})
	t.Run("a skipped item's kind is checked", func(t *testing.T) {
		_, _, err := decodeEventListSkipping(list(`{"kind":"Pod","auditID":"a1","stage":"ResponseComplete"}`), skipA1)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `wrong kind "Pod"`)
		_, _, err = decodeEventListSkipping(list(`{"auditID":"a1","stage":"ResponseComplete","kind":"Pod"}`), skipA1)
		require.Error(t, err, "a kind after the check is decoded again, and checked")
	})
	t.Run("skipped items free their blocks", func(t *testing.T) {
		items := make([]string, 0, 100)
		for i := range 100 {
			id := "a1"
			if i%10 == 0 {
				id = fmt.Sprint("b", i)
			}
			items = append(items, `{"auditID":"`+id+`","stage":"ResponseComplete","verb":"update"}`)
		}
		evs, n, err := decodeEventListSkipping(list(items...), skipA1)
		require.NoError(t, err)
		assert.Equal(t, 90, n)
		require.Len(t, evs, 10)
		for i, ev := range evs {
			assert.Equal(t, fmt.Sprint("b", i*10), ev.AuditID, "no kept event was overwritten by a skipped one")
			assert.Equal(t, "update", ev.Verb)
		}
	})
}

func TestRepeatSetBounded(t *testing.T) {
	forgotten := 0
	s := newRepeatSet(4, func(n int) { forgotten += n })
	evs := func(ids ...string) []*Event {
		out := make([]*Event, len(ids))
		for i, id := range ids {
			out[i] = &Event{AuditID: id, Stage: "ResponseComplete"}
		}
		return out
	}
	s.add("c", evs("a", "b"))
	kept, n := s.filter("c", evs("a", "x", "b"))
	assert.Equal(t, 2, n)
	assert.Equal(t, evs("x"), kept)
	kept, n = s.filter("other", evs("a"))
	assert.Zero(t, n, "another cluster's event of the same audit ID is not a repeat")
	assert.Len(t, kept, 1)

	s.add("c", evs("c", "d")) // the window (4) holds a to d
	assert.Zero(t, forgotten)
	s.add("c", evs("e")) // a and b are forgotten
	assert.Equal(t, 2, forgotten)
	_, n = s.filter("c", evs("a", "b", "c", "d", "e"))
	assert.Equal(t, 3, n)
}

// TestWebhookQueuesARepeatOnce: a batch posted again (the answer was lost and kube-apiserver
// retried) is answered 200 but its events are not queued again; a batch that overlaps queues
// only what is new; a batch the queue refused is not remembered, so its retry is queued.
func TestWebhookQueuesARepeatOnce(t *testing.T) {
	batches := readFixtureLines(t, "rollout", "webhook-batches.jsonl")
	first, err := DecodeEventList(batches[0])
	require.NoError(t, err)
	wt := newWebhookTest(t, WebhookConfig{DefaultCluster: "c"})

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
	wt.q.err = fmt.Errorf("partition 1: %w", ErrQueueFull)
	require.Equal(t, http.StatusTooManyRequests, wt.post("/audit", bytes.NewReader(batches[1]), nil).Code)
	wt.q.err = nil
	require.Equal(t, http.StatusOK, wt.post("/audit", bytes.NewReader(batches[1]), nil).Code)
	require.Len(t, wt.q.recorded(), 3)
	second, err := DecodeEventList(batches[1])
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
	batch := readFixtureLines(t, "rollout", "webhook-batches.jsonl")[0]
	wt := newWebhookTest(t, WebhookConfig{DefaultCluster: "c", RepeatWindow: -1})
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
	batch := readFixtureLines(t, "rollout", "webhook-batches.jsonl")[0]
	n := len(mustDecodeList(t, batch))
	wt := newWebhookTest(t, WebhookConfig{DefaultCluster: "c"})
	tap := &tapRecorder{}
	wt.webhook.AddTap(tap)
	for range 2 {
		require.Equal(t, http.StatusOK, wt.post("/audit", bytes.NewReader(batch), nil).Code)
	}
	assert.Equal(t, []int{n, n}, tap.events)
	assert.Len(t, wt.q.recorded(), 1)
	assert.Equal(t, int64(n), wt.counters(t)["kelemetry.audit.webhook.repeated_events"][""])
}

func mustDecodeList(t *testing.T, data []byte) []*Event {
	t.Helper()
	evs, err := DecodeEventList(data)
	require.NoError(t, err)
	return evs
}

// TestWebhookRemembersOnlyWholeBodies: a body with an event dropped for its timestamp is not
// answered from the body memory (the event may be accepted later); its queued events still are
// repeats.
func TestWebhookRemembersOnlyWholeBodies(t *testing.T) {
	wt := newWebhookTest(t, WebhookConfig{DefaultCluster: "c", MaxFutureSkew: time.Hour})
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
	wt := newWebhookTest(t, WebhookConfig{DefaultCluster: "c"})
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
		evs, err := DecodeEventList(b)
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

func TestBodyClass(t *testing.T) {
	for size, want := range map[int64]int{
		1: -1, 8 << 10: -1, 8<<10 + 1: 0, 16 << 10: 0, 16<<10 + 1: 1, 32 << 10: 1,
		200 << 10: 4, 8 << 20: 9, 8<<20 + 1: -1,
	} {
		assert.Equal(t, want, bodyClass(size), size)
		if want >= 0 {
			assert.GreaterOrEqual(t, int64(minPooledBody<<want), size)
			buf, h := newBody(size)
			assert.Equal(t, int(size), cap(buf))
			assert.Equal(t, minPooledBody<<want, cap(*h.pooled))
			h.recycle()
			assert.Nil(t, h.pooled)
		}
	}
}
