package event

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/internal/timecheck"
)

// timeDrops counts and logs (rate-limited) the Events dropped for their timestamps.
type timeDrops struct {
	counter metric.Int64Counter
	logger  *slog.Logger
	limit   ratelog.Limiter
}

func newTimeDrops(m *instrument.Meter, logger *slog.Logger) *timeDrops {
	return &timeDrops{
		counter: m.Counter("kelemetry.event.dropped_events",
			"Kubernetes Events dropped for their timestamps, by reason (unrepresentable_time, future_time).", "{event}",
			instrument.Sets("reason", timecheck.TimeReasonUnrepresentable, timecheck.TimeReasonFuture)...),
		logger: logger,
		limit:  ratelog.Limiter{Burst: 10, Every: 10 * time.Second},
	}
}

// drop counts and logs err if it is a Convert error for a timestamp, and returns its reason;
// otherwise it returns "".
func (d *timeDrops) drop(ctx context.Context, err error) string {
	var te *timecheck.TimeError
	if !errors.As(err, &te) {
		return ""
	}
	reason := te.Reason()
	d.counter.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	if ok, suppressed := d.limit.Allow(time.Now()); ok {
		d.logger.LogAttrs(ctx, slog.LevelWarn, "drop Event with a bad timestamp",
			slog.String("error", err.Error()), slog.Int("suppressedSinceLastLog", suppressed))
	}
	return reason
}
