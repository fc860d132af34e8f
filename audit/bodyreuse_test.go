package audit

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/internal/bodybuf"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bulkBodies returns the first n webhook bodies of the bulk fixture (most over 100 KB: pooled).
func bulkBodies(t *testing.T, n int) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 8<<20)
	var out [][]byte
	for len(out) < n && sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	require.NoError(t, sc.Err())
	require.Len(t, out, n)
	return out
}

// TestWebhookReusesBodiesOnceHandled: when the queue says when it is done with a batch's events
// (the queues in memory and on disk), the webhook's body buffers go back to their pool once every
// event decoded from them was handled, and bodybuf.Poisoned fills them with 0xff then. What the
// consumer handed the aggregator (times, attributes, diff logs, object snapshots) is still exactly
// what it hands over when no body is reused: an observer on the queue keeps its events, so then
// the webhook leaves each body to the garbage collector. Nothing the consumer keeps aliases a
// body, and no body goes back to the pool before its events were handled.
func TestWebhookReusesBodiesOnceHandled(t *testing.T) {
	bodybuf.Poisoned.Store(true)
	t.Cleanup(func() { bodybuf.Poisoned.Store(false) })
	bodies := bulkBodies(t, 30)

	run := func(t *testing.T, qcfg queue.Config, observers ...Observer) map[string]*aggregator.Event {
		agg := &aggregatortest.RecordingAggregator{}
		pl, err := New(Config{Cluster: "bulk", Queue: qcfg}, Deps{Aggregator: agg, Observers: observers, Telemetry: quiet})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, pl.Start(ctx))
		srv := httptest.NewServer(pl.Webhook)
		defer srv.Close()
		for i, body := range bodies {
			resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
			require.NoError(t, err)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "batch %d", i)
		}
		require.NoError(t, pl.Stop(ctx))
		out := map[string]*aggregator.Event{}
		for _, ev := range agg.Events() {
			k := ev.ID + " " + ev.Object.Key().String()
			require.NotContains(t, out, k)
			out[k] = ev
		}
		return out
	}
	for name, qcfg := range map[string]queue.Config{
		"durable": {Dir: t.TempDir()},
		"memory":  {},
	} {
		t.Run(name, func(t *testing.T) {
			reused := run(t, qcfg)
			kept := run(t, queue.Config{}, &recordingObserver{})
			require.NotEmpty(t, kept)
			require.Equal(t, len(kept), len(reused), "events handed to the aggregator")
			for k, want := range kept {
				got := reused[k]
				require.NotNil(t, got, k)
				assert.Equal(t, want, got, k)
				assert.NotContains(t, string(got.Object.Body), "\xff", k)
			}
		})
	}
}
