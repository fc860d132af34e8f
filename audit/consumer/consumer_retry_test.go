package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// unavailableAggregator fails the first failures sends with a retryable error.
type unavailableAggregator struct {
	mu       sync.Mutex
	failures int
	calls    int
	sent     []*aggregator.Event
}

func (a *unavailableAggregator) Send(_ context.Context, ev *aggregator.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.calls <= a.failures {
		return fmt.Errorf("store: %w", aggregator.ErrSinkUnavailable)
	}
	a.sent = append(a.sent, ev)
	return nil
}

// An event whose store write fails because the store is temporarily unavailable (full disk) is
// retried with backoff until it is written, not dropped.
func TestConsumerRetriesUnavailableSink(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	agg := &unavailableAggregator{failures: 3}
	c, err := New(Config{}, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	require.NoError(t, err)
	c.retryMin = time.Millisecond
	c.Handle(context.Background(), "kind", consumerEvent())
	assert.Equal(t, 4, agg.calls)
	require.Len(t, agg.sent, 1)
	byResult := telemetrytest.Sums(t, reader, "result")
	assert.Equal(t, int64(1), byResult["kelemetry.audit.consumer.events{result=sent}"])
	assert.Zero(t, byResult["kelemetry.audit.consumer.events{result=send_error}"])
	assert.Equal(t, int64(3), telemetrytest.Sums(t, reader, "")["kelemetry.audit.consumer.send.retries"])
}

// When the queue gives up (shutdown deadline), the retried event is abandoned and counted.
func TestConsumerAbandonsRetryOnCancel(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	agg := &unavailableAggregator{failures: 1 << 30}
	c, err := New(Config{}, Deps{Aggregator: agg, Telemetry: telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	require.NoError(t, err)
	c.retryMin = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	c.Handle(ctx, "kind", consumerEvent())
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, agg.sent)
	byReason := telemetrytest.Sums(t, reader, "reason")
	assert.Equal(t, int64(1), byReason["kelemetry.audit.consumer.events{reason=abandoned}"])
}
