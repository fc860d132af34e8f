package otlpsink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Through the aggregator: a full sink makes Engine.SinkHealth report ErrSinkBusy (the webhook's
// 429) and Send fail with ErrSinkUnavailable (the audit consumer's retry); retrying the refused
// events once the receiver drains the queue loses nothing.
func TestAggregatorRetriesRefusedEvents(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	s := newSink(t, Config{QueueSize: 8, BatchSize: 4, FlushInterval: time.Millisecond, EnqueueTimeout: -1}, rec, nil)
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{s}, Telemetry: telemetry.Settings{Logger: quiet}})
	require.NoError(t, err)

	event := func(i int) *aggregator.Event {
		return &aggregator.Event{
			Object: aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: "c", Resource: "pods", Namespace: "ns", Name: fmt.Sprint("pod-", i)}},
			Source: "audit", ID: fmt.Sprint("id-", i), Title: "create", Start: window.Add(time.Duration(i) * time.Second),
		}
	}
	var refused []int
	for i := range 10 {
		if err := engine.Send(ctx, event(i)); err != nil {
			require.ErrorIs(t, err, aggregator.ErrSinkUnavailable)
			refused = append(refused, i)
		}
	}
	require.NotEmpty(t, refused, "the sink is not started: its queue fills")
	require.ErrorIs(t, engine.SinkHealth(ctx), aggregator.ErrSinkBusy)

	require.NoError(t, s.Start(ctx))
	for _, i := range refused {
		require.Eventually(t, func() bool { return engine.Send(ctx, event(i)) == nil }, 5*time.Second, time.Millisecond)
	}
	require.NoError(t, engine.Stop(ctx))
	require.NoError(t, s.Stop(ctx))

	rec.mu.Lock()
	defer rec.mu.Unlock()
	ids := map[trace.SpanID]bool{}
	for _, id := range rec.ids {
		assert.False(t, ids[id], "span %s sent once", id)
		ids[id] = true
	}
	assert.Len(t, ids, 20, "an object span and an event span for each of 10 events")
}
