package pebble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The whole ingest path on a disk that fills up: events already queued are retried, not lost;
// the webhook answers 503 while the store cannot write, the queue fills and refuses more; when
// space returns the store recovers by itself and every queued event is stored.
func TestPebbleDiskFullThroughPipeline(t *testing.T) {
	ctx := context.Background()
	tel := telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}
	ffs := newFaultFS()
	p := openFaultPebble(t, Config{}, ffs)
	require.NoError(t, p.Start(ctx)) // retention and recovery
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Telemetry: tel, Sinks: []aggregator.Sink{p}})
	require.NoError(t, err)
	consumer, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: engine, Telemetry: tel})
	require.NoError(t, err)
	q, err := queue.New(queue.Config{Capacity: 8, Partitions: 1}, queue.Deps{Handle: consumer.Handle, Telemetry: tel})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		assert.NoError(t, q.Stop(stopCtx))
	})
	wh := webhook.New(webhook.Config{DefaultCluster: "c"}, webhook.Deps{Queue: q, Health: engine.SinkHealth, Telemetry: tel})

	now := time.Now().UTC()
	ev := func(i int) *auditv1.Event {
		return &auditv1.Event{
			Kind: "Event", APIVersion: "audit.k8s.io/v1", AuditID: fmt.Sprintf("id-%d", i), Stage: "ResponseComplete",
			Verb: "update", ObjectRef: &auditv1.ObjectReference{Resource: "configmaps", Namespace: "ns", Name: fmt.Sprintf("cm-%d", i), APIVersion: "v1"},
			ResponseStatus:           &auditv1.Status{Code: 200},
			RequestReceivedTimestamp: now, StageTimestamp: now.Add(time.Millisecond),
		}
	}

	ffs.full.Store(true)
	expireSpaceCheck(p)
	// Accepted just before the disk filled: the consumer keeps retrying them.
	for i := range 8 {
		require.NoError(t, q.Enqueue(ctx, "c", []*auditv1.Event{ev(i)}))
	}
	require.Eventually(t, func() bool { return q.Len() >= 7 }, 5*time.Second, 10*time.Millisecond)
	err = q.Enqueue(ctx, "c", []*auditv1.Event{ev(8), ev(9)})
	require.ErrorIs(t, err, queue.ErrFull, "the queue fills: the webhook would answer 429")

	rec := httptest.NewRecorder()
	wh.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit", strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`)))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), "disk full")

	ffs.full.Store(false)
	flushCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, q.Flush(flushCtx), "the queue drains once the disk has room")
	require.NoError(t, p.Health(ctx))
	res, err := p.FindObjects(ctx, query.ObjectQuery{Cluster: "c"})
	require.NoError(t, err)
	assert.Len(t, res, 8, "every event queued before the disk filled is stored")

	rec = httptest.NewRecorder()
	wh.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/audit", strings.NewReader(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[]}`)))
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NoError(t, engine.Stop(ctx))
	require.NoError(t, errors.Join(p.Stop(ctx)))
}
