package timecheck_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/timecheck"
)

func TestCheckTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		t      time.Time
		skew   time.Duration
		want   error
		reason string
		msg    string
	}{
		{name: "now", t: now, skew: 24 * time.Hour},
		{name: "past", t: now.AddDate(-30, 0, 0), skew: 24 * time.Hour},
		{name: "within skew", t: now.Add(23 * time.Hour), skew: 24 * time.Hour},
		{name: "earliest", t: timecheck.MinTime, skew: 24 * time.Hour},
		// Beyond both the skew and the representable range: the message states the skew, the
		// rule a sender can act on (not a range that 2262-01-01 seems to be inside of).
		{name: "2262-01-01", t: time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), skew: 24 * time.Hour,
			want: timecheck.ErrTimeInFuture, reason: timecheck.TimeReasonFuture,
			msg: "2262-01-01T00:00:00Z is 2060724h ahead of this receiver's clock (max future skew 24h)"},
		{name: "year 9999", t: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), skew: 24 * time.Hour,
			want: timecheck.ErrTimeInFuture, reason: timecheck.TimeReasonFuture,
			msg: "9999-01-01T00:00:00Z is more than 292 years ahead of this receiver's clock (max future skew 24h)"},
		{name: "year 9999 with skew off", t: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), skew: -1,
			want: timecheck.ErrTimeUnrepresentable, reason: timecheck.TimeReasonUnrepresentable,
			msg: "9999-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)"},
		{name: "year 1600", t: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), skew: 24 * time.Hour,
			want: timecheck.ErrTimeUnrepresentable, reason: timecheck.TimeReasonUnrepresentable,
			msg: "1600-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)"},
		{name: "zero time", t: time.Time{}, skew: 24 * time.Hour,
			want: timecheck.ErrTimeUnrepresentable, reason: timecheck.TimeReasonUnrepresentable,
			msg: "0001-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)"},
		{name: "max time", t: timecheck.MaxTime, skew: -1,
			want: timecheck.ErrTimeUnrepresentable, reason: timecheck.TimeReasonUnrepresentable,
			msg: "2262-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)"},
		{name: "2262 with skew off", t: time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Second), skew: -1,
			want: nil},
		{name: "30 days ahead", t: now.Add(720 * time.Hour), skew: 24 * time.Hour,
			want: timecheck.ErrTimeInFuture, reason: timecheck.TimeReasonFuture,
			msg: "2026-12-30T12:00:00Z is 720h ahead of this receiver's clock (max future skew 24h)"},
		{name: "skew off", t: now.Add(720 * time.Hour), skew: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := timecheck.CheckTime(tt.t, now, tt.skew)
			if tt.want == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			var te *timecheck.TimeError
			require.True(t, errors.As(err, &te))
			assert.Equal(t, tt.reason, te.Reason())
			if tt.msg != "" {
				assert.Equal(t, tt.msg, err.Error())
			}
		})
	}
}

func TestCheckTimeSetting(t *testing.T) {
	now := time.Now()
	err := timecheck.CheckTime(now.Add(48*time.Hour+30*time.Minute), now, 24*time.Hour)
	var te *timecheck.TimeError
	require.True(t, errors.As(err, &te))
	assert.Contains(t, te.WithSetting("audit.maxFutureSkew").Error(),
		"is 48h30m0s ahead of this receiver's clock (audit.maxFutureSkew 24h)")
}

func TestWindowStartAtBounds(t *testing.T) {
	// The window of any accepted time is representable too (no overflow at the edges).
	for _, tm := range []time.Time{timecheck.MinTime, timecheck.MaxTime.Add(-time.Nanosecond)} {
		require.NoError(t, timecheck.CheckTime(tm, tm, 0))
		ws := aggregator.WindowStart(tm, 24*time.Hour)
		assert.False(t, ws.After(tm), "window of %s starts at %s", tm, ws)
		assert.Less(t, tm.Sub(ws), 24*time.Hour)
	}
}
