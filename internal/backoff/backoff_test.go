package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDelay(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{{-1, 100 * time.Millisecond}, {0, 100 * time.Millisecond}, {1, 200 * time.Millisecond}, {3, 800 * time.Millisecond}, {4, time.Second}, {1000, time.Second}} {
		assert.Equal(t, tc.want, p.Delay(tc.attempt), "attempt %d", tc.attempt)
	}
	assert.Equal(t, DefaultMax, Policy{}.Delay(1<<30), "zero value: defaults, no overflow")
	assert.Equal(t, DefaultBase, Policy{}.Delay(0))
}

func TestSleepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, Policy{Base: time.Hour, Max: time.Hour}.Sleep(ctx, 0))
	assert.True(t, Policy{Base: time.Nanosecond, Max: time.Nanosecond}.Sleep(context.Background(), 3))
}
