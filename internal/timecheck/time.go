package timecheck

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The times Kelemetry can place in a trace and store: spans are keyed and encoded by
// time.Time.UnixNano, which covers 1677-09-21 to 2262-04-11. The range is narrowed to whole years,
// [MinTime, MaxTime), so that the window of any accepted time, and an end a little after its
// start, are representable too.
var (
	// MinTime is the earliest time CheckTime accepts (1678-01-01T00:00:00Z).
	MinTime = time.Date(minYear, 1, 1, 0, 0, 0, 0, time.UTC)
	// MaxTime is the first time CheckTime refuses as too late (2262-01-01T00:00:00Z).
	MaxTime = time.Date(maxYear, 1, 1, 0, 0, 0, 0, time.UTC)
)

// minYear and maxYear are the years of MinTime and MaxTime, for messages and documentation.
const (
	minYear = 1678
	maxYear = 2262
)

// DefaultMaxFutureSkew is how far ahead of the receiver's clock a source's timestamps may be by
// default before the event is dropped (sources' maxFutureSkew settings).
const DefaultMaxFutureSkew = 24 * time.Hour

// Sentinels of CheckTime's errors, for errors.Is.
var (
	// ErrTimeUnrepresentable is a time outside [MinTime, MaxTime).
	ErrTimeUnrepresentable = errors.New("time outside the representable range")
	// ErrTimeInFuture is a time further ahead of the receiver's clock than allowed.
	ErrTimeInFuture = errors.New("time too far in the future")
)

// Reasons of a TimeError, the reason attribute of the sources' drop counters.
const (
	TimeReasonUnrepresentable = "unrepresentable_time"
	TimeReasonFuture          = "future_time"
)

// TimeError is a time that CheckTime refused. It wraps ErrTimeUnrepresentable or ErrTimeInFuture.
type TimeError struct {
	// Time is the refused time.
	Time time.Time
	// Ahead is how far Time is ahead of the receiver's clock (for ErrTimeInFuture).
	Ahead time.Duration
	// MaxFutureSkew is the limit Ahead exceeded (for ErrTimeInFuture).
	MaxFutureSkew time.Duration
	// Setting names the configuration key of MaxFutureSkew in messages; empty means
	// "max future skew".
	Setting string

	err error
}

// Error states the rule that refused the time, for example "1600-01-01T00:00:00Z is outside the
// representable range (years 1678 to 2261)" or "2026-12-30T12:00:00Z is 720h ahead of this
// receiver's clock (audit.maxFutureSkew 24h)".
func (e *TimeError) Error() string {
	ts := e.Time.UTC().Format(time.RFC3339Nano)
	if errors.Is(e.err, ErrTimeUnrepresentable) {
		return ts + " is outside the representable range (years " + strconv.Itoa(minYear) + " to " + strconv.Itoa(maxYear-1) + ")"
	}
	setting := e.Setting
	if setting == "" {
		setting = "max future skew"
	}
	ahead := formatDuration(e.Ahead)
	if e.Ahead == math.MaxInt64 { // time.Time.Sub saturates
		ahead = "more than 292 years"
	}
	return fmt.Sprintf("%s is %s ahead of this receiver's clock (%s %s)",
		ts, ahead, setting, formatDuration(e.MaxFutureSkew))
}

// Unwrap returns ErrTimeUnrepresentable or ErrTimeInFuture.
func (e *TimeError) Unwrap() error { return e.err }

// Reason is TimeReasonUnrepresentable or TimeReasonFuture, for metrics.
func (e *TimeError) Reason() string {
	if errors.Is(e.err, ErrTimeUnrepresentable) {
		return TimeReasonUnrepresentable
	}
	return TimeReasonFuture
}

// WithSetting returns a copy of e whose message names the configuration key of the skew.
func (e *TimeError) WithSetting(key string) *TimeError {
	c := *e
	c.Setting = key
	return &c
}

// CheckTime reports, as a *TimeError, a time that Kelemetry cannot place in a trace: one more than
// maxFutureSkew ahead of now (kept, a single event from a wrong clock would become the newest
// window of the store), or one outside [MinTime, MaxTime) (kept, it would be stored at the wrong
// time and then removed by retention). A time that breaks both rules, such as 2262-01-01 or
// 9999-01-01 with the skew check on, is reported as too far in the future: that is the rule a
// sender can act on, and the message states it. A negative maxFutureSkew turns the future check
// off; zero allows no skew at all. The zero time (0001-01-01T00:00:00Z) is before MinTime:
// sources that read it as an absent timestamp skip it before calling CheckTime.
func CheckTime(t, now time.Time, maxFutureSkew time.Duration) error {
	if t.Before(MinTime) {
		return &TimeError{Time: t, err: ErrTimeUnrepresentable}
	}
	if maxFutureSkew >= 0 {
		if ahead := t.Sub(now); ahead > maxFutureSkew {
			return &TimeError{Time: t, Ahead: ahead, MaxFutureSkew: maxFutureSkew, err: ErrTimeInFuture}
		}
	}
	if !t.Before(MaxTime) {
		return &TimeError{Time: t, err: ErrTimeUnrepresentable}
	}
	return nil
}

// formatDuration prints whole hours as "720h", other durations as time.Duration does, rounded to
// the second.
func formatDuration(d time.Duration) string {
	if d != 0 && d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.Round(time.Second).String()
}
