package timecheck

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// maxFutureSkewSetting names the configuration key of the skew in messages.
const maxFutureSkewSetting = "audit.maxFutureSkew"

// maxTimeProblems bounds the problems named in one answer or log line.
const maxTimeProblems = 5

// TimeProblem is an event dropped for one of its timestamps.
type TimeProblem struct {
	// reason is TimeReasonUnrepresentable or TimeReasonFuture.
	Reason string
	// msg names the item and the field, such as "items[3].stageTimestamp: 1600-01-01T00:00:00Z
	// is outside the representable range (years 1678 to 2261)".
	Message string
	// err is "<field>: <problem>", wrapping the *TimeError.
	Err error
}

// CheckEventTime reports the first timestamp of ev that CheckTime refuses, as
// "<field>: <problem>". A zero timestamp counts as absent (the consumer handles events without
// any).
func CheckEventTime(ev *auditv1.Event, now time.Time, maxFutureSkew time.Duration) (TimeProblem, bool) {
	for _, f := range [...]struct {
		name string
		t    time.Time
	}{{"requestReceivedTimestamp", ev.RequestReceivedTimestamp}, {"stageTimestamp", ev.StageTimestamp}} {
		if f.t.IsZero() {
			continue
		}
		if err := CheckTime(f.t, now, maxFutureSkew); err != nil {
			reason := TimeReasonUnrepresentable
			var te *TimeError
			if errors.As(err, &te) {
				reason, err = te.Reason(), te.WithSetting(maxFutureSkewSetting)
			}
			err = fmt.Errorf("%s: %w", f.name, err)
			return TimeProblem{Reason: reason, Message: err.Error(), Err: err}, false
		}
	}
	return TimeProblem{}, true
}

// noTimeProblem is the problem of an event whose timestamps are both the zero time: absent, null
// or 0001-01-01T00:00:00Z (which decode alike). Such an event cannot be placed in time, so the
// receivers drop it up front, as CheckTime refuses the zero time, rather than answer
// "accepted" and have the consumer drop it later.
func noTimeProblem() TimeProblem {
	err := CheckTime(time.Time{}, time.Time{}, -1)
	err = fmt.Errorf("stageTimestamp: %w, as is requestReceivedTimestamp (absent, null or zero)", err)
	return TimeProblem{Reason: TimeReasonUnrepresentable, Message: err.Error(), Err: err}
}

// FilterEventTimes keeps the events whose timestamps pass CheckEventTime, in order, and returns
// the problems of the others; prefix(i) names item i in messages (e.g. "items[3]."). An event with
// no timestamp at all (both zero: absent, null or 0001-01-01T00:00:00Z) is dropped too
// (noTimeProblem). events is filtered in place.
func FilterEventTimes(events []*auditv1.Event, now time.Time, maxFutureSkew time.Duration, prefix func(i int) string) ([]*auditv1.Event, []TimeProblem) {
	var problems []TimeProblem
	kept := events[:0]
	for i, ev := range events {
		if ev == nil {
			kept = append(kept, ev)
			continue
		}
		p, ok := CheckEventTime(ev, now, maxFutureSkew)
		if ok && ev.RequestReceivedTimestamp.IsZero() && ev.StageTimestamp.IsZero() {
			p, ok = noTimeProblem(), false
		}
		if ok {
			kept = append(kept, ev)
			continue
		}
		p.Message = prefix(i) + p.Message
		problems = append(problems, p)
	}
	clear(events[len(kept):]) // do not keep dropped events reachable
	return kept, problems
}

// summarizeProblems joins the first problems into one line, saying how many more there are.
func SummarizeProblems(problems []TimeProblem) string {
	var b strings.Builder
	for i, p := range problems {
		if i == maxTimeProblems {
			b.WriteString("; and " + strconv.Itoa(len(problems)-i) + " more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Message)
	}
	return b.String()
}
