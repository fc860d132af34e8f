package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/telemetry"
)

// meterScope names the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/frontend"

// ErrBusy is returned by Engine.Admit and Engine.Acquire when no turn came within
// Config.QueueWait, or when too many requests wait already.
var ErrBusy = errors.New("too many queries are running")

// errMemoryBusy is wrapped, with ErrBusy, by the error of a request refused because the memory
// budget of the running requests (Config.MaxMemoryBytes) had no room for it.
var errMemoryBusy = errors.New("the query memory budget is in use")

// limiter admits the heavy requests: at most maxRunning at once and, with a memory budget, only
// while the budget has room for a new request's estimate. The estimate is an equal share of the
// budget (budget/maxRunning): every running request is sure of it. A running request charges
// what it reads and renders (ticket.chargeRead, chargeRender); past its share it takes memory no
// other request holds, and when there is none its reads stop (the result is truncated). A
// request admitted alone may use the whole budget. Requests wait in arrival order at most wait;
// at most 4×maxRunning wait, later ones are refused at once.
type limiter struct {
	maxRunning int
	maxWaiting int
	wait       time.Duration
	budget     int64 // bytes; 0: no memory budget
	estimate   int64 // what a request is admitted with (0 without a budget)
	keep       int64 // what a request's reads leave of its reservation, to draw the result
	growStep   int64 // the least a request's reservation grows by

	// gc is lent the memory of the running requests as the collector's headroom (gcroom.go).
	gc *gcLender

	mu       sync.Mutex
	running  int
	reserved int64
	queue    []*waiter
}

// waiter is a request waiting for its turn; t is set (and ready closed) when it is admitted.
type waiter struct {
	ready chan struct{}
	t     *ticket
}

// newLimiter admits maxRunning requests at once within budget bytes (0: no memory budget);
// renderBytes is what one request may render (Config.MaxRenderBytes).
func newLimiter(maxRunning int, wait time.Duration, budget, renderBytes int64) *limiter {
	maxRunning = max(maxRunning, 1)
	l := &limiter{maxRunning: maxRunning, maxWaiting: 4 * maxRunning, wait: wait, budget: max(budget, 0), gc: gcRoom}
	if l.budget > 0 {
		l.estimate = l.budget / int64(maxRunning)
		l.keep = min(l.estimate/4, renderBytes*renderFactorNum/renderFactorDen)
		l.growStep = max(min(l.estimate/16, 4<<20), 64<<10)
	}
	return l
}

// goMemoryLimit is the Go runtime's memory limit (GOMEMLIMIT, debug.SetMemoryLimit), or 0 when
// none is set.
func goMemoryLimit() int64 {
	if n := debug.SetMemoryLimit(-1); n > 0 && n < math.MaxInt64 {
		return n
	}
	return 0
}

// fitsLocked reports whether a new request can be admitted now.
func (l *limiter) fitsLocked() bool {
	return l.running < l.maxRunning && (l.budget == 0 || l.running == 0 || l.reserved+l.estimate <= l.budget)
}

func (l *limiter) admitLocked() *ticket {
	l.running++
	l.reserved += l.estimate
	t := &ticket{l: l, reserved: l.estimate, lent: l.estimate}
	if l.budget == 0 {
		t.lent = noBudgetRoom
	}
	l.gc.lend(t.lent)
	return t
}

// grantLocked admits the waiters at the head of the queue while they fit.
func (l *limiter) grantLocked() {
	for len(l.queue) > 0 && l.fitsLocked() {
		w := l.queue[0]
		l.queue = l.queue[1:]
		w.t = l.admitLocked()
		close(w.ready)
	}
}

// busyLocked is the error of a request that got no turn: ErrBusy, and errMemoryBusy when a
// turn was free but the memory budget had no room.
func (l *limiter) busyLocked() error {
	if l.running < l.maxRunning && l.budget > 0 {
		return fmt.Errorf("%w: %w (%s held of %s)", ErrBusy, errMemoryBusy, formatBytes(l.reserved), formatBytes(l.budget))
	}
	return ErrBusy
}

// acquire admits a request, waiting at most l.wait. It returns an error wrapping ErrBusy when
// no turn came in time, or the context's error.
func (l *limiter) acquire(ctx context.Context) (*ticket, error) {
	l.mu.Lock()
	if len(l.queue) == 0 && l.fitsLocked() {
		t := l.admitLocked()
		l.mu.Unlock()
		return t, nil
	}
	if len(l.queue) >= l.maxWaiting {
		err := l.busyLocked()
		l.mu.Unlock()
		return nil, err
	}
	w := &waiter{ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
		return w.t, nil
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.t != nil { // admitted just as the wait ended
		if err == nil {
			return w.t, nil
		}
		w.t.released = true // nobody else has seen it
		l.giveBackLocked(w.t)
		return nil, err
	}
	if i := slices.Index(l.queue, w); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
	if err == nil {
		err = l.busyLocked()
	}
	// The request leaving may have been the one the others waited behind.
	l.grantLocked()
	return nil, err
}

// grow takes want bytes from the budget when they fit, else need. ok is false when even need
// did not fit: it is taken anyway, as it is in memory (or, for a read, kept to draw what was
// read).
func (l *limiter) grow(need, want int64) (got int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	free := l.budget - l.reserved
	switch {
	case l.budget == 0:
		got, ok = need, true
	case want <= free:
		got, ok = want, true
	default:
		got, ok = need, need <= free
	}
	l.reserved += got
	return got, ok
}

// giveBackLocked ends request t: its memory goes back to the budget (and the collector's
// headroom), and the waiters that now fit are admitted.
func (l *limiter) giveBackLocked(t *ticket) {
	l.running--
	l.reserved -= t.reserved
	l.gc.repay(t.lent)
	l.grantLocked()
}

// reservedBytes is the memory the running requests hold (their estimates and what they grew by).
func (l *limiter) reservedBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserved
}

// retryAfter is the Retry-After of a refused request, in whole seconds.
func (l *limiter) retryAfter() string {
	return strconv.Itoa(max(1, int(math.Ceil(l.wait.Seconds()))))
}

// ticket is one admitted heavy request: the memory it reserved and what it charged.
type ticket struct {
	l        *limiter
	mu       sync.Mutex
	reserved int64 // taken from the budget
	lent     int64 // lent to the garbage collector while it runs (gcLender)
	used     int64 // charged: read and rendered
	short    bool  // a read did not fit the budget
	released bool
}

// chargeRead counts n more bytes the request read. Past its reservation (less what it keeps to
// draw the result, limiter.keep) it takes more from the budget; it reports false when the budget
// had no room (the bytes are counted anyway: they are in memory), and the request should stop
// reading. A nil ticket (no admission) takes anything.
func (t *ticket) chargeRead(n int64) bool {
	return t.add(n, true)
}

// chargeRender counts n more bytes of the drawn result. It is never refused: the reads stopped
// when the memory ran out, and what was read can be drawn within Config.MaxRenderBytes, for
// which the reads left room (limiter.keep).
func (t *ticket) chargeRender(n int64) {
	t.add(n, false)
}

func (t *ticket) add(n int64, read bool) bool {
	if t == nil || n <= 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.used += n
	keep := int64(0)
	if read {
		keep = t.l.keep
	}
	if t.released || t.used+keep <= t.reserved {
		return true
	}
	need := t.used + keep - t.reserved
	got, ok := t.l.grow(need, max(need, t.l.growStep))
	t.reserved += got
	if !ok && read {
		t.short = true
	}
	return ok || !read
}

// room is how many more bytes the request may read now: what its reservation has left (less
// what it keeps to draw the result) and its share of what the budget has free (all of it when it
// runs alone); -1 without a budget. The share matters because a read is charged once it is in
// memory: requests running at once that each sized their next read by all of the free budget
// read it several times over (rounds of four heavy queries held 137 MiB of live heap against a
// 64 MiB budget and a 128 MiB memory limit).
func (t *ticket) room() int64 {
	if t == nil || t.l.budget == 0 {
		return -1
	}
	t.mu.Lock()
	left := t.reserved - t.used - t.l.keep
	t.mu.Unlock()
	t.l.mu.Lock()
	free := t.l.budget - t.l.reserved
	running := max(t.l.running, 1)
	t.l.mu.Unlock()
	return max(left, 0) + max(free, 0)/int64(running)
}

// release gives the turn and the memory back; later calls do nothing.
func (t *ticket) release() {
	t.mu.Lock() // before l.mu, as in charge
	defer t.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.l.giveBackLocked(t)
}

// memoryMessage is the truncation message of a request whose reads stopped for memory.
func (t *ticket) memoryMessage() string {
	return memoryBudgetMsg(t.l.budget)
}

func memoryBudgetMsg(budget int64) string {
	return "result truncated: memory budget of " + formatBytes(budget) +
		" reached (shared by the queries running at once); narrow the time range or try again later"
}

// formatBytes writes n in MiB when it is at least 1 MiB, in bytes otherwise.
func formatBytes(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

type ticketKey struct{}

// withTicket returns ctx carrying t: what the request reads and renders is charged to it.
func withTicket(ctx context.Context, t *ticket) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// ticketOf is the admission of ctx's request; nil when it was not admitted (its charges are
// free).
func ticketOf(ctx context.Context) *ticket {
	t, _ := ctx.Value(ticketKey{}).(*ticket)
	return t
}

// Estimates of the heap a request holds, from what it read and rendered. Measured on the bulk
// fixture (ten copies, the full-tree search of every Deployment): 191 MiB of spans read
// (aggregator.Span.ApproxBytes) left 239 MiB of live heap in the merged graphs, and 64 MiB of
// rendered JSON 73 MiB in the drawn traces; both are charged at 5/4.
const (
	readFactorNum, readFactorDen     = 5, 4
	renderFactorNum, renderFactorDen = 5, 4
)

// readBytes is the charge of spans read: their ApproxBytes (the strings and a fixed overhead per
// span, attribute and log) times readFactor.
func readBytes(traces [][]*aggregator.Span) int64 {
	// Summed in parallel: a large read's 200,000 spans took 10 ms on one core.
	var n atomic.Int64
	inParallel(len(traces), minParallelTraces, func(lo, hi int) {
		var part int64
		for _, spans := range traces[lo:hi] {
			for _, sp := range spans {
				part += sp.ApproxBytes()
			}
		}
		n.Add(part)
	})
	return n.Load() * readFactorNum / readFactorDen
}

// minParallelTraces is the least number of traces a goroutine sums the bytes of.
const minParallelTraces = 512

// chargeRead charges the spans ctx's request read (readBytes). It reports false when the memory
// budget had no room: the request should stop reading.
func chargeRead(ctx context.Context, traces [][]*aggregator.Span) bool {
	t := ticketOf(ctx)
	if t == nil {
		return true
	}
	return t.chargeRead(readBytes(traces))
}

// Admit takes a turn among the engine's heavy requests (Config.MaxConcurrent) with the memory
// estimate of one (Config.MaxMemoryBytes/MaxConcurrent), waiting at most Config.QueueWait; call
// release when done. The returned context carries the admission: what the engine reads and
// draws for it is charged to it, and its reads stop (a truncated result) when the memory budget
// has no room left. It returns an error wrapping ErrBusy when no turn came (and errMemoryBusy
// when memory was what lacked), or the context's error. APIs other than the HTTP ones (such as
// the storage gRPC API) use it to share the limits.
func (e *Engine) Admit(ctx context.Context) (context.Context, func(), error) {
	t, err := e.limiter.acquire(ctx)
	if err != nil {
		return ctx, nil, err
	}
	return withTicket(ctx, t), t.release, nil
}

// Acquire is Admit for callers that keep their context: the request counts with its estimate
// only, what it reads is not charged.
func (e *Engine) Acquire(ctx context.Context) (release func(), err error) {
	_, release, err = e.Admit(ctx)
	return release, err
}

// Charge counts n bytes more that ctx's request (admitted by Admit) read and holds; false when
// the memory budget had no room for them (they are counted anyway): the request should stop
// reading and answer what it has.
func (e *Engine) Charge(ctx context.Context, n int64) bool {
	return ticketOf(ctx).chargeRead(n)
}

// MemoryBudget is the memory the engine's heavy requests may hold at once (Config.MaxMemoryBytes
// resolved), 0 when unbounded.
func (e *Engine) MemoryBudget() int64 { return e.limiter.budget }

// queryMetrics are the counters of the APIs over the engine.
type queryMetrics struct {
	rejected  metric.Int64Counter
	truncated metric.Int64Counter
	api       attribute.KeyValue
}

func newQueryMetrics(tel telemetry.Settings, api string) queryMetrics {
	m := instrument.NewMeter(tel, meterScope)
	apiAttr := attribute.String("api", api)
	q := queryMetrics{
		rejected: m.Counter("kelemetry.frontend.queries.rejected",
			"Heavy queries refused (503) because no turn came within QueueWait, by api (ui, jaeger, native) and reason: concurrency (frontend.Config.MaxConcurrent were running) or memory (their memory budget MaxMemoryBytes had no room).", "{query}",
			attribute.NewSet(apiAttr, attribute.String("reason", "concurrency")), attribute.NewSet(apiAttr, attribute.String("reason", "memory"))),
		truncated: m.Counter("kelemetry.frontend.queries.truncated",
			"Queries answered with a truncated result because a budget (spans, bytes, time, memory) ran out, by api (ui, jaeger, native).", "{query}",
			attribute.NewSet(apiAttr)),
		api: apiAttr,
	}
	if err := m.Err(); err != nil {
		tel.Log().Warn("frontend metrics", "error", err)
	}
	return q
}

// BusyReason is the reason attribute of a refused request's metric: "memory" when the memory
// budget lacked room (errMemoryBusy), "concurrency" otherwise.
func BusyReason(err error) string {
	if errors.Is(err, errMemoryBusy) {
		return "memory"
	}
	return "concurrency"
}

// heavy runs h within the limits of heavy requests; a request that gets no turn is answered 503
// with Retry-After and counted. The request's time is bounded by timeout.
func heavy(l *limiter, m queryMetrics, timeout time.Duration, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		t, err := l.acquire(ctx)
		if err != nil {
			if errors.Is(err, ErrBusy) {
				m.rejected.Add(ctx, 1, metric.WithAttributes(m.api, attribute.String("reason", BusyReason(err))))
				w.Header().Set("Retry-After", l.retryAfter())
				jaegerError(w, http.StatusServiceUnavailable, "%v: try again later", err)
			}
			return
		}
		defer t.release()
		h(w, r.WithContext(withTicket(ctx, t)))
	}
}
