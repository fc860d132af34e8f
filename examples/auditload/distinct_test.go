package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
)

// copied is what a test reads of one distinct copy of an event.
type copied struct {
	AuditID   string    `json:"auditID"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Stage     time.Time `json:"stageTimestamp"`
	URI       string    `json:"requestURI"`
	ObjectRef *struct {
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
	ResponseObject *struct {
		Metadata struct {
			UID             string `json:"uid"`
			Namespace       string `json:"namespace"`
			OwnerReferences []struct {
				UID string `json:"uid"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	} `json:"responseObject"`
}

func decodeCopies(t *testing.T, b batch) []copied {
	t.Helper()
	var list struct {
		Items []copied `json:"items"`
	}
	require.NoError(t, json.Unmarshal(b.body, &list))
	require.Len(t, list.Items, b.events)
	// The product's decoder reads the copies too.
	evs, err := auditv1.DecodeEventList(b.body)
	require.NoError(t, err)
	require.Len(t, evs, b.events)
	return list.Items
}

// TestDistinctCopies: every pass is new events: audit IDs and UIDs never repeat across passes (nor
// match the recording), namespaces carry the pass, owner references name their owner's new UID,
// and the audit timestamps are the time of posting with the recorded latency kept.
func TestDistinctCopies(t *testing.T) {
	batches, err := readBatches(rolloutBatches, 400)
	require.NoError(t, err)
	var recorded []copied
	uids := map[string]bool{} // the recorded UIDs
	for _, b := range batches {
		for _, ev := range decodeCopies(t, b) {
			recorded = append(recorded, ev)
			if ev.ResponseObject != nil && ev.ResponseObject.Metadata.UID != "" {
				uids[ev.ResponseObject.Metadata.UID] = true
			}
		}
	}
	src, err := newDistinctSource(batches)
	require.NoError(t, err)
	n := len(recorded)
	require.Greater(t, n, 10)

	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	auditIDs := map[string]bool{}
	for _, ev := range recorded {
		auditIDs[ev.AuditID] = true
	}
	newUIDs := map[string]int{} // a copy's UID -> pass
	owners, owned := 0, 0
	for pass := range 3 {
		// One pass in two batches, the second straddling into nothing (exactly n events).
		first := src.nextBatch(n/2, now, time.Millisecond)
		second := src.nextBatch(n-n/2, now.Add(time.Second), time.Millisecond)
		evs := append(decodeCopies(t, first), decodeCopies(t, second)...)
		passUIDs := map[string]bool{}
		for _, ev := range evs {
			if ev.ResponseObject != nil && ev.ResponseObject.Metadata.UID != "" {
				passUIDs[ev.ResponseObject.Metadata.UID] = true
			}
		}
		suffix := "-" + src.run + "-" + strconv.Itoa(pass)
		for i, ev := range evs {
			rec := recorded[i]
			assert.False(t, auditIDs[ev.AuditID], "audit ID %s seen before (pass %d, event %d)", ev.AuditID, pass, i)
			auditIDs[ev.AuditID] = true
			if ev.ObjectRef != nil && rec.ObjectRef.Namespace != "" {
				assert.Equal(t, rec.ObjectRef.Namespace+suffix, ev.ObjectRef.Namespace)
				assert.Contains(t, ev.URI, "/namespaces/"+rec.ObjectRef.Namespace+suffix)
			}
			if ev.ResponseObject != nil {
				md := ev.ResponseObject.Metadata
				if md.Namespace != "" {
					assert.True(t, strings.HasSuffix(md.Namespace, suffix), md.Namespace)
				}
				if md.UID != "" {
					assert.False(t, uids[md.UID], "UID %s is the recording's", md.UID)
					if p, ok := newUIDs[md.UID]; ok {
						assert.Equal(t, pass, p, "UID %s of pass %d again in pass %d", md.UID, p, pass)
					}
					newUIDs[md.UID] = pass
				}
				for _, ref := range md.OwnerReferences {
					owners++
					if passUIDs[ref.UID] {
						owned++
					}
				}
			}
			assert.Equal(t, rec.Stage.Sub(rec.Received), ev.Stage.Sub(ev.Received), "latency of event %d", i)
		}
		last := evs[n/2-1]
		assert.True(t, last.Stage.Equal(now), "the last copy of a batch is dated at: %v", last.Stage)
		assert.True(t, evs[0].Stage.Equal(now.Add(-time.Duration(n/2-1)*time.Millisecond)), "copies step by step: %v", evs[0].Stage)
		now = now.Add(time.Minute)
	}
	require.Positive(t, owners)
	// Owners whose own events are in the recording keep being found under their new UIDs.
	assert.Positive(t, owned)
	assert.Len(t, newUIDs, 3*len(uids))
}

// TestDistinctAtRateForDuration: --distinct --rate --duration posts about rate x duration new
// events and stops by itself; the webhook finds no repeat among them and the consumer handles all.
func TestDistinctAtRateForDuration(t *testing.T) {
	s := newServer(t, queue.Config{}, 0)
	hook := httptest.NewServer(s.webhook)
	defer hook.Close()
	metrics := httptest.NewServer(s.metrics)
	defer metrics.Close()

	var out bytes.Buffer
	start := time.Now()
	require.NoError(t, run(context.Background(), []string{"--url", hook.URL + "/audit/load", "--distinct",
		"--rate", "400", "--duration", "1500ms", "--batch", "40", "--progress", "500ms",
		"--metrics-url", metrics.URL, "--settle", "30s", rolloutBatches}, &out), out.String())
	posting := time.Since(start)
	t.Log(out.String())
	accepted := reported(t, out.String(), "events accepted")
	// 400/s for 1.5 s: 600, posted in batches of 40 when their first event is due.
	assert.InDelta(t, 600, accepted, 40)
	assert.Regexp(t, `events accepted\s+`+strconv.Itoa(accepted)+` of `+strconv.Itoa(accepted)+` `, out.String())
	assert.GreaterOrEqual(t, posting, 1400*time.Millisecond, "paced, not posted at once")
	assert.Contains(t, out.String(), "progress ")
	assert.NotRegexp(t, `repeats skipped\s+[1-9]`, out.String())
	assert.Equal(t, accepted, reported(t, out.String(), "consumer events"))
}
