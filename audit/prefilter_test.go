package audit

import (
	"context"
	"testing"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// recordingEventQueue is an Queue that records the batches it takes, or fails with err.
type recordingEventQueue struct {
	queue.Queue // unused methods
	err         error
	batches     [][]*auditv1.Event
}

func (q *recordingEventQueue) Enqueue(_ context.Context, _ string, events []*auditv1.Event) error {
	if q.err != nil {
		return q.err
	}
	q.batches = append(q.batches, events)
	return nil
}

func (q *recordingEventQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.Enqueue(ctx, cluster, events)
}

func TestPrefilterQueuesOnlyWhatTheConsumerKeeps(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	c, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: &aggregatortest.RecordingAggregator{}, Telemetry: telemetry.Settings{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	require.NoError(t, err)
	pod := &auditv1.ObjectReference{Resource: "pods", Namespace: "n", Name: "p", APIVersion: "v1"}
	lease := &auditv1.ObjectReference{Resource: "leases", APIGroup: "coordination.k8s.io", Namespace: "n", Name: "l", APIVersion: "v1"}
	update := &auditv1.Event{AuditID: "1", Stage: "ResponseComplete", Verb: "update", ObjectRef: pod}
	get := &auditv1.Event{AuditID: "2", Stage: "ResponseComplete", Verb: "get", ObjectRef: pod}
	renew := &auditv1.Event{AuditID: "3", Stage: "ResponseComplete", Verb: "update", ObjectRef: lease}
	noID := &auditv1.Event{Stage: "ResponseComplete", Verb: "patch", ObjectRef: pod} // invalid: the consumer logs it
	inner := &recordingEventQueue{}
	obs := &recordingObserver{}
	q := observe(consumer.Prefilter(inner, c), obs)

	require.NoError(t, q.Enqueue(context.Background(), "c", []*auditv1.Event{get, update, renew, noID}))
	require.Len(t, inner.batches, 1)
	assert.Equal(t, []*auditv1.Event{update, noID}, inner.batches[0], "reads and excluded resources stay out of the queue")
	assert.Equal(t, [][]*auditv1.Event{{get, update, renew, noID}}, obs.batches, "observers see every event")
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.audit.consumer.events", "reason", "verb"))
	assert.Equal(t, int64(1), telemetrytest.Int64(t, reader, "kelemetry.audit.consumer.events", "reason", "resource"))

	// A batch of only filtered events reaches no queue, and is accepted.
	require.NoError(t, q.EnqueueWait(context.Background(), "c", []*auditv1.Event{get}))
	assert.Len(t, inner.batches, 1)
	assert.Equal(t, int64(2), telemetrytest.Int64(t, reader, "kelemetry.audit.consumer.events", "reason", "verb"))

	// A refused batch counts nothing: its sender retries it.
	inner.err = queue.ErrFull
	require.ErrorIs(t, q.Enqueue(context.Background(), "c", []*auditv1.Event{get, update}), queue.ErrFull)
	assert.Equal(t, int64(2), telemetrytest.Int64(t, reader, "kelemetry.audit.consumer.events", "reason", "verb"))
	assert.Len(t, obs.batches, 2, "nor is it observed")
}
