package ratelog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Limiter{Burst: 2, Every: time.Minute}
	ok, n := l.Allow(t0)
	assert.True(t, ok)
	assert.Zero(t, n)
	ok, _ = l.Allow(t0)
	assert.True(t, ok, "burst of 2")
	for range 3 {
		ok, _ = l.Allow(t0.Add(time.Second))
		assert.False(t, ok)
	}
	ok, n = l.Allow(t0.Add(61 * time.Second))
	assert.True(t, ok, "refilled after a minute")
	assert.Equal(t, 3, n, "reports what it suppressed")
	ok, _ = l.Allow(t0.Add(30 * time.Second))
	assert.False(t, ok, "time going backwards refills nothing")
	assert.Equal(t, 1, l.TakeSuppressed())
	assert.Zero(t, l.TakeSuppressed())
}

func TestLimiterZeroBurstIsOne(t *testing.T) {
	t0 := time.Now()
	l := Limiter{Every: time.Hour}
	ok, _ := l.Allow(t0)
	assert.True(t, ok)
	ok, _ = l.Allow(t0.Add(time.Minute))
	assert.False(t, ok)
}
