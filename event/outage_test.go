package event

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// outageAggregator refuses the first refusals sends as unavailable (a full disk, a full OTLP
// queue), then records.
type outageAggregator struct {
	aggregatortest.RecordingAggregator
	refusals atomic.Int32
	calls    atomic.Int32
}

func (a *outageAggregator) Send(ctx context.Context, ev *aggregator.Event) error {
	if a.calls.Add(1) <= a.refusals.Load() {
		return fmt.Errorf("otlp queue full: %w", aggregator.ErrSinkBusy)
	}
	return a.RecordingAggregator.Send(ctx, ev)
}

// A replay waits out a sink outage longer than the ordinary retries instead of counting its
// Events as failed.
func TestReplayWaitsOutSinkOutage(t *testing.T) {
	agg := &outageAggregator{}
	agg.refusals.Store(4)
	st, err := ReplayFile(context.Background(), fixture("rollout", "events-core-v1.json"), NewConverter("kind", nil, 0), agg, telemetry.Settings{})
	require.NoError(t, err)
	assert.Equal(t, 30, st.Sent)
	assert.Zero(t, st.Failed)
	assert.Len(t, agg.Events(), 30)
}

// The watch's worker waits out a sink outage too (beyond its three ordinary attempts), and gives
// up once the source stops.
func TestSourceWaitsOutSinkOutage(t *testing.T) {
	agg := &outageAggregator{}
	agg.refusals.Store(sendAttempts + 1)
	s, err := newSource(sourceConfig{}, newFakeClient("1"), NewConverter("c", nil, 0), agg, nil, quiet)
	require.NoError(t, err)
	ev := fromCore(timedCore("e1", nil))
	assert.True(t, s.handle(context.Background(), ev))
	assert.Len(t, agg.Events(), 1, "sent once the sink took it")

	// Stopping (the run ctx ended): no more waiting, the ordinary attempts only.
	agg.calls.Store(0)
	agg.refusals.Store(1000)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	assert.False(t, s.handle(stopped, fromCore(timedCore("e2", nil))))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, int32(sendAttempts), agg.calls.Load())
}
