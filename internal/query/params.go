package query

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The times a query may name: from the Unix epoch to the last whole second Unix nanoseconds
// in an int64 can hold (2262-04-11). Parameters outside are clamped to it, so that no
// conversion to nanoseconds overflows further down.
var (
	minQueryTime = time.Unix(0, 0).UTC()
	maxQueryTime = time.Unix(0, math.MaxInt64).Truncate(time.Second).UTC()
)

// clampTime returns t within [minQueryTime, maxQueryTime]; the zero time stays zero (no bound).
func clampTime(t time.Time) time.Time {
	switch {
	case t.IsZero():
		return t
	case t.Before(minQueryTime):
		return minQueryTime
	case t.After(maxQueryTime):
		return maxQueryTime
	}
	return t
}

// parseMicros reads the Unix microseconds of the named parameter, clamped to the query range
// (also values an int64 cannot hold).
func parseMicros(name, s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			if strings.HasPrefix(s, "-") {
				return minQueryTime, nil
			}
			return maxQueryTime, nil
		}
		return time.Time{}, fmt.Errorf("malformed '%s' parameter %q, want Unix microseconds", name, s)
	}
	if n >= maxQueryTime.UnixMicro() {
		return maxQueryTime, nil
	}
	if n < 0 {
		return minQueryTime, nil
	}
	return time.UnixMicro(n).UTC(), nil
}

// before returns t-d clamped to the query range, without overflowing.
func before(t time.Time, d time.Duration) time.Time {
	if d >= t.Sub(minQueryTime) {
		return minQueryTime
	}
	return t.Add(-d)
}
