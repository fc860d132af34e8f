package kelemetry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

func fastNATS(url string) natsqueue.Config {
	return natsqueue.Config{URLs: []string{url}, Partitions: 8, AckWait: 5 * time.Second, PinnedTTL: 2 * time.Second,
		RetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 200 * time.Millisecond, ConnectTimeout: time.Second,
		ReconnectWait: 20 * time.Millisecond, PublishTimeout: 2 * time.Second}
}

// replayEvents runs batches through a queue (in process, or on NATS with natsURL set) ->
// consumer -> aggregator (built-in linkers) into the memory store and returns the stored spans
// rendered as JSON, keyed by trace and span ID.
func replayEvents(t *testing.T, batches [][]*auditv1.Event, natsURL string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sink := &aggregatortest.RecordingSink{}
	mem := memory.New(memory.Config{}, 0)
	engine, err := aggregator.New(aggregator.Config{LinkWorkers: 2}, aggregator.Deps{
		Sinks: []aggregator.Sink{sink, mem},
		Linkers: []aggregator.Linker{
			linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
			linker.NewAnnotationLinker(nil, telemetry.Settings{}),
		},
	})
	require.NoError(t, err)
	require.NoError(t, engine.Start(ctx))
	consumer, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: engine})
	require.NoError(t, err)
	var q queue.Queue
	if natsURL != "" {
		nq, err := queue.New(queue.Config{NATS: fastNATS(natsURL)}, queue.Deps{Handle: consumer.Handle, Sync: engine.SyncSinks})
		require.NoError(t, err)
		q = nq
	} else {
		mq, err := queue.New(queue.Config{Partitions: 8}, queue.Deps{Handle: consumer.Handle})
		require.NoError(t, err)
		q = mq
	}
	require.NoError(t, q.Start(ctx))
	for _, evs := range batches {
		require.NoError(t, q.EnqueueWait(ctx, "determ", evs))
	}
	require.NoError(t, q.Flush(ctx))
	require.NoError(t, q.Stop(ctx))
	require.NoError(t, engine.Stop(ctx))

	return storedSpans(ctx, t, sink, mem)
}

// TestNATSQueueRolloutSameSpans: the recorded rollout gives the same stored spans (IDs and
// contents) through JetStream as through the in-process queue.
func TestNATSQueueRolloutSameSpans(t *testing.T) {
	events, err := audittest.ReadFile(filepath.Join("testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	var batches [][]*auditv1.Event
	for i := 0; i < len(events); i += 25 {
		batches = append(batches, events[i:min(i+25, len(events))])
	}
	base := replayEvents(t, batches, "")
	require.NotEmpty(t, base)
	js := natstest.StartJetStream(t)
	got := replayEvents(t, batches, js.URL())
	diffs := diffReplays(base, got)
	if len(diffs) > 10 {
		diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
	}
	require.Empty(t, diffs, "%d spans through JetStream against %d in process", len(got), len(base))
	t.Logf("%d events in %d batches, %d distinct spans", len(events), len(batches), len(base))
}

// TestNATSQueueApp: the whole application with audit.queue.nats: the webhook feeds JetStream, the
// same process consumes it into the store, the durable local queue is not used even with a data
// folder, and /healthz reports the NATS connection (503 while NATS is down).
func TestNATSQueueApp(t *testing.T) {
	js := natstest.StartJetStream(t)
	dir := t.TempDir()
	cfg := localConfig(dir)
	cfg.Audit.Queue.NATS = fastNATS(js.URL())
	app, servers := replicaWithConfig(t, cfg)
	defer app.RequireStop()

	postRollout(t, servers.AuditAddr())
	require.Eventually(t, func() bool { return demoTraceFound(t, servers.APIAddr()) }, 30*time.Second, 50*time.Millisecond)
	_, err := os.Stat(filepath.Join(dir, "audit-queue"))
	assert.True(t, os.IsNotExist(err), "no durable local queue with NATS: %v", err)

	health := func() (int, healthz.Body) {
		code, body := get(t, "http://"+servers.APIAddr()+"/healthz")
		var h healthz.Body
		require.NoError(t, json.Unmarshal([]byte(body), &h), body)
		return code, h
	}
	code, h := health()
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "nats: connected", h.Queue)

	js.Stop()
	// The client notices the lost connection within moments.
	require.Eventually(t, func() bool {
		code, h = health()
		return code == http.StatusServiceUnavailable && h.Status == "unavailable" && strings.Contains(h.Queue, "unavailable")
	}, 10*time.Second, 20*time.Millisecond, "/healthz reports NATS down")
	js.Start()
	require.Eventually(t, func() bool { code, _ := health(); return code == http.StatusOK }, 20*time.Second, 50*time.Millisecond)
}

func TestConfigNATSQueue(t *testing.T) {
	cfg := localConfig(t.TempDir())
	cfg.Audit.Queue.NATS.URLs = []string{"nats://127.0.0.1:4222"}
	require.NoError(t, cfg.Validate())
	d := cfg.WithDefaults()
	assert.Empty(t, d.Audit.Queue.Dir, "the data folder gives no durable queue dir with NATS")
	assert.True(t, d.Audit.Queue.IsNATS())

	cfg.Audit.Queue.Dir = t.TempDir()
	assert.ErrorContains(t, cfg.Validate(), "nats.urls and dir")
}

// replicaWithConfig starts the whole application with cfg.
func replicaWithConfig(t *testing.T, cfg kelemetry.Config) (*fxtest.App, *httpserver.Servers) {
	t.Helper()
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	return app, servers
}
