package frontend

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/telemetry"
)

// meterScope names the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/frontend"

// ErrBusy is returned by Engine.Acquire when no turn came within Config.QueueWait, or when
// too many requests wait already.
var ErrBusy = errors.New("too many queries are running")

// limiter bounds the heavy requests running at once. A request waits at most wait for a turn;
// at most 4×max requests wait, later ones are refused at once.
type limiter struct {
	slots   chan struct{}
	waiting atomic.Int64
	maxWait int64
	wait    time.Duration
}

func newLimiter(maxRunning int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, maxRunning), maxWait: 4 * int64(maxRunning), wait: wait}
}

// acquire takes a turn; release gives it back. It returns ErrBusy when no turn came in time,
// or the context's error.
func (l *limiter) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-l.slots }
	select {
	case l.slots <- struct{}{}:
		return release, nil
	default:
	}
	if l.waiting.Add(1) > l.maxWait {
		l.waiting.Add(-1)
		return nil, ErrBusy
	}
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Acquire takes a turn among the engine's heavy requests (Config.MaxConcurrent), waiting at
// most Config.QueueWait; call release when done. It returns ErrBusy when no turn came, or the
// context's error. APIs other than the HTTP ones (such as the storage gRPC API) use it to share
// the limit.
func (e *Engine) Acquire(ctx context.Context) (release func(), err error) {
	return e.limiter.acquire(ctx)
}

// retryAfter is the Retry-After of a refused request, in whole seconds.
func (l *limiter) retryAfter() string {
	return strconv.Itoa(max(1, int(math.Ceil(l.wait.Seconds()))))
}

// queryMetrics are the counters of the APIs over the engine.
type queryMetrics struct {
	rejected  metric.Int64Counter
	truncated metric.Int64Counter
	api       attribute.KeyValue
}

func newQueryMetrics(tel telemetry.Settings, api string) queryMetrics {
	m := tel.Meter(meterScope)
	q := queryMetrics{
		rejected: m.Counter("kelemetry.frontend.queries.rejected",
			"Heavy queries refused (503) because frontend.Config.MaxConcurrent were running and no turn came within QueueWait.", "{query}"),
		truncated: m.Counter("kelemetry.frontend.queries.truncated",
			"Queries answered with a truncated result because a budget (spans, bytes, time) ran out.", "{query}"),
		api: attribute.String("api", api),
	}
	if err := m.Err(); err != nil {
		tel.Log().Warn("frontend metrics", "error", err)
	}
	return q
}

// heavy runs h within the limit of concurrent heavy requests; a request that gets no turn is
// answered 503 with Retry-After and counted. The request's time is bounded by timeout.
func heavy(l *limiter, m queryMetrics, timeout time.Duration, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		release, err := l.acquire(r.Context())
		if err != nil {
			if errors.Is(err, ErrBusy) {
				m.rejected.Add(r.Context(), 1, metric.WithAttributes(m.api))
				w.Header().Set("Retry-After", l.retryAfter())
				jaegerError(w, http.StatusServiceUnavailable, "%v: try again later", err)
			}
			return
		}
		defer release()
		h(w, r)
	}
}
