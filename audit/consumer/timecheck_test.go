package consumer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/timecheck"
)

// TestConsumerRefusesUnrepresentableTimes: events that reach the queue without a receiver's
// check (a Queue fed by code of one's own) are refused by the consumer, not stored at a wrong time.
func TestConsumerRefusesUnrepresentableTimes(t *testing.T) {
	c := newTestConsumer(t, Config{})
	ev := consumerEvent()
	ev.StageTimestamp = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	_, _, err := c.Convert("c1", ev)
	require.ErrorIs(t, err, aggregator.ErrInvalidEvent)
	require.ErrorIs(t, err, timecheck.ErrTimeUnrepresentable)
	assert.Contains(t, err.Error(), "stageTimestamp: 9999-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)")
	// The consumer does not apply the receivers' future skew.
	ev = consumerEvent()
	ev.StageTimestamp = time.Now().Add(720 * time.Hour)
	_, keep, err := c.Convert("c1", ev)
	require.NoError(t, err)
	assert.True(t, keep)
}
