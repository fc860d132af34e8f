// Package backoff computes the waits between retries of a failing operation: exponential from a
// base, capped, and reset by the caller after a success.
package backoff

import (
	"context"
	"time"
)

// Policy is an exponential backoff: the wait before retry n (0-based) is Base << n, at most Max.
// The zero value means Base 100ms and Max 10s.
type Policy struct {
	Base time.Duration
	Max  time.Duration
}

// Default values of Policy.
const (
	DefaultBase = 100 * time.Millisecond
	DefaultMax  = 10 * time.Second
)

// Delay returns the wait before retry attempt (0-based).
func (p Policy) Delay(attempt int) time.Duration {
	base, ceiling := p.Base, p.Max
	if base <= 0 {
		base = DefaultBase
	}
	if ceiling <= 0 {
		ceiling = DefaultMax
	}
	if attempt < 0 {
		attempt = 0
	}
	// Shift no further than what fits below the ceiling, so that it never overflows.
	d := base
	for i := 0; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}

// Sleep waits for the delay of attempt, or until ctx ends; it reports whether the whole delay
// passed.
func (p Policy) Sleep(ctx context.Context, attempt int) bool {
	t := time.NewTimer(p.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
