// Package ratelog rate-limits repeated log lines: a token bucket that lets a burst through and
// then one line per interval, and counts what it suppressed so the next line can say so.
package ratelog

import (
	"sync"
	"time"
)

// Limiter is a token bucket of Burst lines, refilled one per Every. The zero Burst means 1, so
// Limiter{Every: time.Minute} lets one line a minute through. Safe for concurrent use.
type Limiter struct {
	Burst int
	Every time.Duration

	mu         sync.Mutex
	init       bool
	tokens     float64
	last       time.Time
	suppressed int
}

// Allow reports whether to log at now, and how many lines were suppressed since the last one
// allowed (to be logged with it).
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	burst := float64(max(l.Burst, 1))
	if !l.init {
		l.init, l.tokens, l.last = true, burst, now
	}
	if l.Every > 0 && now.After(l.last) {
		l.tokens = min(l.tokens+float64(now.Sub(l.last))/float64(l.Every), burst)
	}
	if now.After(l.last) {
		l.last = now
	}
	if l.tokens >= 1 {
		l.tokens--
		suppressed, l.suppressed = l.suppressed, 0
		return true, suppressed
	}
	l.suppressed++
	return false, 0
}

// TakeSuppressed returns and forgets the number of suppressed lines (for a final summary).
func (l *Limiter) TakeSuppressed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.suppressed
	l.suppressed = 0
	return n
}
