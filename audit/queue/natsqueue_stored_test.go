package queue_test

import (
	"context"
	"testing"

	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/audit/queue/internal/natslog"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/auditfixture"
)

// spanCheckingSink is a recording sink that tells which spans it holds, as the jaeger store does.
type spanCheckingSink struct{ aggregatortest.RecordingSink }

func (s *spanCheckingSink) HasSpans(_ context.Context, refs []aggregator.SpanRef) ([]bool, error) {
	held := map[[24]byte]bool{}
	for _, sp := range s.Spans() {
		var k [24]byte
		copy(k[:16], sp.TraceID[:])
		copy(k[16:], sp.SpanID[:])
		held[k] = true
	}
	out := make([]bool, len(refs))
	for i, r := range refs {
		var k [24]byte
		copy(k[:16], r.TraceID[:])
		copy(k[16:], r.SpanID[:])
		out[i] = held[k]
	}
	return out, nil
}

// Stored says which of the recorded rollout's events the sinks hold: those handled, not the
// others, nor the events that write no span; the NATS queue's check asks it per message.
func TestConsumerStored(t *testing.T) {
	ctx := queue.Ctx(t)
	events := auditfixture.Events(t, "rollout")
	sink := &spanCheckingSink{}
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{sink}})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	c, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: e})
	require.NoError(t, err)
	half := len(events) / 2
	for _, ev := range events[:half] {
		c.Handle(ctx, "kind", ev)
	}
	has, err := c.Stored(ctx, "kind", events)
	require.NoError(t, err)
	require.Len(t, has, len(events))
	var stored, spanless int
	for i, ev := range events {
		_, keep, _ := c.Convert("kind", ev)
		switch {
		case !keep:
			spanless++
			assert.False(t, has[i], "event %d writes no span", i)
		case i < half:
			stored++
			assert.True(t, has[i], "event %d was handled", i)
		default:
			assert.False(t, has[i], "event %d was not handled", i)
		}
	}
	require.Positive(t, stored)
	has, err = c.Stored(ctx, "other-cluster", events[:half])
	require.NoError(t, err)
	assert.NotContains(t, has, true, "another cluster's objects are other traces")

	// Per message, through the NATS queue's check.
	q, err := queue.New(queue.Config{NATS: queue.NATSTestConfig("nats://127.0.0.1:1")}, queue.Deps{Handle: c.Handle, Stored: c.Stored})
	require.NoError(t, err)
	var ds []natslog.Delivery
	var want []bool
	for i, ev := range events {
		_, keep, _ := c.Convert("kind", ev)
		ds = append(ds, natslog.Delivery{Sequence: uint64(i + 1), Payload: queue.AppendBatch(nil, "kind", []*auditv1.Event{ev})})
		want = append(want, keep && i < half)
	}
	ds = append(ds, natslog.Delivery{Sequence: 9999, Payload: []byte("not a record")})
	want = append(want, false)
	got, err := queue.StoredMsgs(ctx, q, ds)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// An aggregator that cannot tell: nothing is stored, the events are handled again.
	plain, err := consumer.New(consumer.Config{}, consumer.Deps{Aggregator: &aggregatortest.RecordingAggregator{}})
	require.NoError(t, err)
	has, err = plain.Stored(ctx, "kind", events)
	require.NoError(t, err)
	assert.NotContains(t, has, true)
}
