package webhook

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/audit/queue"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/internal/bodybuf"
	"github.com/kelemetry/kelemetry/audit/internal/repeats"
	"github.com/kelemetry/kelemetry/internal/clip"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/telemetry"
)

// defaultWebhookMaxBodyBytes is the default limit of a webhook request body, after decompression.
const defaultWebhookMaxBodyBytes = 32 << 20

// webhookRetryAfter is the Retry-After value, in seconds, of a 429 answer.
const webhookRetryAfter = "1"

// maxReasonLen bounds the reason sent back to the client and logged.
const maxReasonLen = 512

// Config configures a Webhook. The zero value means defaults.
type Config struct {
	// DefaultCluster names the cluster of batches posted to /audit. Batches posted to
	// /audit/{cluster} name their own. If empty, posts to /audit are refused (400).
	DefaultCluster string `yaml:"defaultCluster"`
	// MaxBodyBytes limits a request body, after gzip decompression (default 32 MiB). A larger
	// body is refused (413).
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	// MaxInflightBytes bounds the bytes of request bodies being read and decoded at once, across
	// all requests (default twice MaxBodyBytes; at least MaxBodyBytes). A request whose
	// Content-Length does not fit in what is left is answered 429 with Retry-After before its
	// body is read; a body without Content-Length (chunked, or gzip as it decompresses) takes
	// its bytes as it grows and is answered 429 when it cannot. Such a body may briefly need 1.5
	// times its size while its buffer grows. How long a body may take to arrive is bounded by the
	// audit listener's read timeout (httpserver Timeouts.Read, 30s by default).
	MaxInflightBytes int64 `yaml:"maxInflightBytes"`
	// MaxFutureSkew is how far ahead of this receiver's clock an event's timestamps may be
	// (default aggregator.DefaultMaxFutureSkew, 24h; negative: no limit). New sets it from
	// Config.MaxFutureSkew (the audit.maxFutureSkew key).
	MaxFutureSkew time.Duration `yaml:"-"`
	// RepeatWindow is how many of the events it enqueued lately (cluster, audit ID and stage) the
	// webhook remembers, so that an event posted again (kube-apiserver retrying a batch whose
	// answer it did not get, a dump or log replayed twice) is answered 200 but not queued again:
	// it is counted in kelemetry_audit_webhook_repeated_events_total. Default
	// DefaultWebhookRepeatWindow (100,000, about 4 MB); negative turns the check off. The
	// consumer's own check (ConsumerConfig.DedupSize) still catches repeats that reach another
	// replica or come back from a queue's redelivery.
	RepeatWindow int `yaml:"repeatWindow"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultWebhookMaxBodyBytes
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = 2 * c.MaxBodyBytes
	}
	if c.MaxFutureSkew == 0 {
		c.MaxFutureSkew = timecheck.DefaultMaxFutureSkew
	}
	if c.RepeatWindow == 0 {
		c.RepeatWindow = repeats.DefaultWebhookRepeatWindow
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("webhook maxBodyBytes %d is negative", c.MaxBodyBytes)
	}
	if d := c.WithDefaults(); d.MaxInflightBytes < d.MaxBodyBytes {
		return fmt.Errorf("webhook maxInflightBytes %d is less than maxBodyBytes %d: a body of the largest size could never be read",
			c.MaxInflightBytes, d.MaxBodyBytes)
	}
	if c.DefaultCluster != "" {
		if err := aggregator.ValidateClusterName(c.DefaultCluster); err != nil {
			return fmt.Errorf("webhook defaultCluster: %w", err)
		}
	}
	return nil
}

// Webhook is the http.Handler of kube-apiserver's audit webhook backend
// (--audit-webhook-config-file pointing at http(s)://<host>/audit/<cluster>). It decodes each posted
// audit.k8s.io/v1 EventList and enqueues the whole batch; it answers 200 only once the batch is
// enqueued, 429 with Retry-After when the queue is full or too many bytes are being read at once
// (MaxInflightBytes; kube-apiserver retries), 503 with Retry-After when the queue is unavailable
// (ErrUnavailable: NATS out of reach) or stopped (or, with Retry-After,
// while the sinks are unhealthy: see SetHealth), 400 for a malformed batch and 413 for one over the
// size limit.
//
// An item whose requestReceivedTimestamp or stageTimestamp is more than MaxFutureSkew ahead of
// this receiver's clock or outside what the store can represent (aggregator.CheckTime: years 1678
// to 2261), or that has no timestamp at all (both absent, null or 0001-01-01T00:00:00Z), is
// dropped and counted (kelemetry.audit.webhook.dropped_events, by reason), and the rest of the
// batch is enqueued and answered 200, with the dropped items named in the answer and in a
// rate-limited log line that states the rule, such as "items[3].stageTimestamp:
// 1600-01-01T00:00:00Z is outside the representable range (years 1678 to 2261)" or
// "items[4].stageTimestamp: 2262-01-01T00:00:00Z is 2060623h ahead of this receiver's clock
// (audit.maxFutureSkew 24h)". Refusing the whole batch would lose its good items: kube-apiserver
// does not retry a 400, and retrying could not fix the bad ones. Only a batch whose every item is
// bad is answered 400, with the same message.
//
// Refused batches are logged rate-limited per reason (a burst of 5, then one line per 30s), each
// line with the number suppressed before it (suppressedSinceLastLog); every one is counted in
// kelemetry.audit.webhook.rejected and kelemetry.audit.webhook.requests.
//
// The cluster comes from the path, else from DefaultCluster; never from the client's address or
// headers. The handler does not filter events (the consumer does). Each request body is read into
// a buffer of its own that the enqueued events alias (see DecodeEventList) and that is never
// reused.
type Webhook struct {
	cfg    Config
	q      queue.Enqueuer
	logger *slog.Logger
	health func(context.Context) error // see SetHealth
	taps   []BatchTap                  // see AddTap

	requests metric.Int64Counter
	duration metric.Float64Histogram
	events   metric.Int64Counter
	rejected metric.Int64Counter
	dropped  metric.Int64Counter
	repeated metric.Int64Counter
	repeats  *repeats.Set // nil when RepeatWindow < 0
	bodies   *repeats.Set // the hashes of the bodies whose every event was queued; nil as repeats

	inflight *byteBudget
	badLog   ratelog.Limiter
	// rejectLogs rate-limit the lines of refused batches, one limiter per reason (built in
	// New, read-only after), so that one retrying client's 429s do not hide a 400.
	rejectLogs map[string]*ratelog.Limiter
}

// Rate limit of the lines of refused batches, per reason: a burst, then one line per interval,
// each with the number suppressed before it (at most about 25 lines per reason in 10 minutes).
const (
	rejectLogBurst = 5
	rejectLogEvery = 30 * time.Second
)

// rejectOther is the limiter key of reasons without a limiter of their own.
const rejectOther = ""

// Reasons of rejected batches, the reason attribute of kelemetry.audit.webhook.rejected.
const (
	rejectBadRequest = "bad_request"
	rejectTooLarge   = "too_large"
	rejectQueueFull  = "queue_full"
	rejectStopped    = "stopped"
	// rejectQueueUnavailable is a 503 because the queue's store (NATS) is out of reach.
	rejectQueueUnavailable = "queue_unavailable"
	rejectError            = "error"
	// rejectInflight is a 429 because MaxInflightBytes were being read.
	rejectInflight = "inflight_bytes"
	// rejectBadTimestamp is a 400 for a batch whose every item has a bad timestamp.
	rejectBadTimestamp = "bad_timestamp"
)

// Deps are what the webhook needs from the rest of the pipeline, given to New.
type Deps struct {
	// Queue takes the events of each accepted batch (required).
	Queue queue.Enqueuer
	// Health, when set, makes the webhook refuse batches (without reading the body) while it
	// returns an error, e.g. the sinks' health while the store's disk is full or the queue's while
	// NATS is out of reach: kube-apiserver then keeps the batches and retries. The answer is 503
	// with Retry-After and the reason, or 429 with Retry-After when every failing sink is only
	// back-pressured (its error wraps aggregator.ErrSinkBusy, e.g. the OTLP sink's full queue).
	Health func(ctx context.Context) error
	// Taps see each accepted batch after it was queued (the dump and the forwarders).
	Taps []BatchTap
	// Telemetry gives the logger and meter provider (either may be unset).
	Telemetry telemetry.Settings
}

// New returns a webhook handler that enqueues into d.Queue. cfg should be valid (see Validate);
// defaults fill its zero fields.
// An instrument that cannot be created is logged and replaced by a no-op one.
func New(cfg Config, d Deps) *Webhook {
	ts := d.Telemetry
	w := &Webhook{cfg: cfg.WithDefaults(), q: d.Queue, health: d.Health, taps: d.Taps, logger: ts.Log().With("component", "audit-webhook"),
		badLog: ratelog.Limiter{Burst: 10, Every: 10 * time.Second}, rejectLogs: map[string]*ratelog.Limiter{}}
	for _, reason := range []string{rejectOther, rejectBadRequest, rejectTooLarge, rejectQueueFull, rejectStopped,
		rejectQueueUnavailable, rejectError, rejectInflight, rejectBadTimestamp, rejectUnavailable, rejectSinkBusy} {
		w.rejectLogs[reason] = &ratelog.Limiter{Burst: rejectLogBurst, Every: rejectLogEvery}
	}
	meter := instrument.NewMeter(ts, meterName)
	inflightBytes := meter.UpDownCounter("kelemetry.audit.webhook.inflight_bytes",
		"Bytes of audit webhook request bodies being read and decoded now (bounded by maxInflightBytes).", "By")
	w.inflight = newByteBudget(w.cfg.MaxInflightBytes, func(delta int64) {
		inflightBytes.Add(context.Background(), delta)
	})
	// The codes the webhook answers, at 0 from the start: an alert's ratio of 429 and 503 to all
	// requests sees the first refusal.
	var codes []attribute.Set
	for _, c := range []int{http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusServiceUnavailable} {
		codes = append(codes, attribute.NewSet(attribute.Int("code", c)))
	}
	w.requests = meter.Counter("kelemetry.audit.webhook.requests",
		"Audit webhook requests, by HTTP status code.", "{request}", codes...)
	// From a cached repeat's tens of microseconds to a large batch waiting on a slow disk.
	w.duration = meter.Histogram("kelemetry.audit.webhook.duration",
		"Time the webhook took to answer a request (read, decode, queue), whatever its answer.", "s",
		0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	w.events = meter.Counter("kelemetry.audit.webhook.events",
		"Audit events accepted by the webhook (enqueued).", "{event}", *attribute.EmptySet())
	w.rejected = meter.Counter("kelemetry.audit.webhook.rejected",
		"Audit webhook batches rejected, by reason (bad_request, too_large, queue_full, queue_unavailable, stopped, unavailable, sink_busy, error, inflight_bytes, bad_timestamp).", "{batch}",
		reasons("bad_request", "too_large", "queue_full", "queue_unavailable", "stopped", "unavailable", "sink_busy", "error", "inflight_bytes", "bad_timestamp")...)
	w.dropped = meter.Counter("kelemetry.audit.webhook.dropped_events",
		"Audit events dropped by the webhook for their timestamps, by reason (unrepresentable_time, future_time).", "{event}",
		reasons("unrepresentable_time", "future_time")...)
	w.repeated = meter.Counter("kelemetry.audit.webhook.repeated_events",
		"Audit events answered 200 but not queued because the webhook queued the same event (cluster, audit ID, stage) lately (repeatWindow).", "{event}", *attribute.EmptySet())
	if w.cfg.RepeatWindow > 0 {
		forgotten := meter.Counter("kelemetry.audit.webhook.repeat_evictions",
			"Audit events the webhook's repeat check forgot to stay within repeatWindow: a repeat of one of them is queued again (and caught by the consumer's check).", "{event}", *attribute.EmptySet())
		w.repeats = repeats.NewSet(w.cfg.RepeatWindow, func(n int) { forgotten.Add(context.Background(), int64(n)) })
		forgottenBodies := meter.Counter("kelemetry.audit.webhook.repeat_body_evictions",
			"Request bodies the webhook's repeat check forgot (it remembers 4096): one posted again is decoded and its events checked one by one.", "{batch}", *attribute.EmptySet())
		w.bodies = repeats.NewSet(repeats.RepeatBodies, func(n int) { forgottenBodies.Add(context.Background(), int64(n)) })
	}
	if err := meter.Err(); err != nil {
		w.logger.Warn("audit webhook", "error", err)
	}
	return w
}

// Register registers the webhook on mux at POST /audit and POST /audit/{cluster}. The mux answers
// other methods on these paths with 405.
func (w *Webhook) Register(mux *http.ServeMux) {
	mux.Handle("POST /audit", w)
	mux.Handle("POST /audit/{cluster}", w)
}

// ServeHTTP handles one posted batch.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := time.Now()
	defer func() { w.duration.Record(ctx, time.Since(start).Seconds()) }()
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		w.reject(ctx, rw, http.StatusMethodNotAllowed, rejectBadRequest, "", "method "+r.Method+" not allowed, use POST")
		return
	}

	cluster := r.PathValue("cluster")
	switch {
	case cluster == "" && w.cfg.DefaultCluster == "":
		w.reject(ctx, rw, http.StatusBadRequest, rejectBadRequest, "",
			"no cluster: post to /audit/{cluster} or configure a default cluster")
		return
	case cluster == "":
		cluster = w.cfg.DefaultCluster
	default:
		if err := aggregator.ValidateClusterName(cluster); err != nil {
			w.reject(ctx, rw, http.StatusBadRequest, rejectBadRequest, "", "cluster in path: "+err.Error())
			return
		}
	}

	if w.unavailable(ctx, rw, cluster) {
		return
	}

	data, res, status, err := w.readBody(rw, r)
	defer res.release()
	if err != nil {
		reason := rejectBadRequest
		switch status {
		case http.StatusRequestEntityTooLarge:
			reason = rejectTooLarge
		case http.StatusTooManyRequests:
			reason = rejectInflight
			rw.Header().Set("Retry-After", webhookRetryAfter)
		}
		w.reject(ctx, rw, status, reason, cluster, err.Error())
		return
	}

	// A body posted again whole (kube-apiserver retries a batch with the same bytes) is answered
	// at once; repeats in a new body are left out while decoding, which spares most of their
	// cost. Not while taps need every item.
	var bodyKey uint64
	var skip func([]byte, string) bool
	if w.repeats != nil && len(w.taps) == 0 {
		bodyKey = repeats.BodyHash(cluster, data)
		if n, ok := w.bodies.Get(bodyKey); ok {
			res.reuse = true
			w.answerRepeats(ctx, rw, int(n))
			return
		}
		skip = func(auditID []byte, stage string) bool {
			return w.repeats.Has(repeats.EventHash(cluster, auditID, stage))
		}
	}
	events, repeats, err := auditv1.DecodeEventListSkipping(data, skip)
	if err != nil {
		res.reuse = true // the events decoded so far are dropped
		w.reject(ctx, rw, http.StatusBadRequest, rejectBadRequest, cluster, err.Error())
		return
	}
	received := events
	if len(w.taps) > 0 {
		received = slices.Clone(events) // checkTimes filters in place; taps need the dropped items' indexes
	}
	if repeats > 0 && len(events) == 0 {
		res.reuse = true
		w.bodies.Put(bodyKey, int32(min(repeats, math.MaxInt32)))
		w.answerRepeats(ctx, rw, repeats)
		return
	}
	total := len(events) + repeats
	events, dropNote, ok := w.checkTimes(ctx, rw, cluster, events, repeats)
	if !ok {
		return
	}
	whole := dropNote == "" // every event of the body is queued once this one is
	queued := events
	if w.repeats != nil && len(w.taps) > 0 {
		var n int
		queued, n = w.repeats.Filter(cluster, events)
		repeats += n
	}
	if repeats > 0 {
		dropNote += ", " + strconv.Itoa(repeats) + " repeated events were queued before"
	}

	if len(queued) > 0 {
		if err := w.enqueue(ctx, cluster, queued, res); err != nil {
			switch {
			case errors.Is(err, queue.ErrBatchTooLarge):
				// Retrying cannot help: say so rather than asking for a retry.
				w.reject(ctx, rw, http.StatusRequestEntityTooLarge, rejectTooLarge, cluster,
					fmt.Sprintf("enqueue %d events: %v (raise audit.queue.capacity or lower --audit-webhook-batch-max-size)", len(queued), err))
			case errors.Is(err, queue.ErrFull):
				rw.Header().Set("Retry-After", webhookRetryAfter)
				w.reject(ctx, rw, http.StatusTooManyRequests, rejectQueueFull, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(queued), err))
			case errors.Is(err, queue.ErrUnavailable):
				// The queue's store (NATS) is out of reach: the batch was not accepted, and
				// kube-apiserver retries a 503 that carries Retry-After.
				rw.Header().Set("Retry-After", webhookRetryAfter)
				w.reject(ctx, rw, http.StatusServiceUnavailable, rejectQueueUnavailable, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(queued), err))
			case errors.Is(err, queue.ErrStopped):
				// A replica shutting down: kube-apiserver retries a 503 only with Retry-After, and
				// the retry reaches another replica through the Service.
				rw.Header().Set("Retry-After", webhookRetryAfter)
				w.reject(ctx, rw, http.StatusServiceUnavailable, rejectStopped, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(queued), err))
			default:
				w.reject(ctx, rw, http.StatusInternalServerError, rejectError, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(queued), err))
			}
			return
		}
	}

	if w.repeats != nil {
		w.repeats.Add(cluster, queued)
		if whole && total > 0 && bodyKey != 0 {
			w.bodies.Put(bodyKey, int32(min(total, math.MaxInt32)))
		}
	}
	w.events.Add(ctx, int64(len(queued)))
	if repeats > 0 {
		w.repeated.Add(ctx, int64(repeats))
	}
	w.notifyTaps(ctx, cluster, data, received, events)
	w.count(ctx, http.StatusOK)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rw, "accepted "+strconv.Itoa(len(queued))+" events"+dropNote+"\n")
}

// enqueue queues the events of a body. When the queue says when it is done with their memory
// (bodybuf.ReleasingEnqueuer) and no tap reads the body, the body's buffer is shared between the
// request and the queue: it goes back to its pool once the request was answered and every event
// was handled, rather than being left to the garbage collector.
func (w *Webhook) enqueue(ctx context.Context, cluster string, events []*auditv1.Event, res *reservation) error {
	rq, ok := w.q.(bodybuf.ReleasingEnqueuer)
	if !ok || len(w.taps) > 0 {
		return w.q.Enqueue(ctx, cluster, events)
	}
	release := res.body.Share(2) // the request's share is given back by res.release
	res.shared = release
	return rq.EnqueueReleasing(ctx, cluster, events, release)
}

// answerRepeats answers 200 for a batch whose every item was queued before.
func (w *Webhook) answerRepeats(ctx context.Context, rw http.ResponseWriter, repeats int) {
	w.repeated.Add(ctx, int64(repeats))
	w.count(ctx, http.StatusOK)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rw, "accepted 0 events, "+strconv.Itoa(repeats)+" repeated events were queued before\n")
}

// checkTimes drops the events with a timestamp that aggregator.CheckTime refuses, counts and logs
// them (rate-limited). It returns the events to enqueue and a note on what was dropped for the
// answer; when every event was dropped and the batch held no repeat either it answers 400
// itself and reports false.
func (w *Webhook) checkTimes(ctx context.Context, rw http.ResponseWriter, cluster string, events []*auditv1.Event, repeats int) ([]*auditv1.Event, string, bool) {
	n := len(events)
	kept, problems := timecheck.FilterEventTimes(events, time.Now(), w.cfg.MaxFutureSkew, func(i int) string {
		return "items[" + strconv.Itoa(i) + "]."
	})
	if len(problems) == 0 {
		return kept, "", true
	}
	for _, p := range problems {
		w.dropped.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", p.Reason)))
	}
	summary := timecheck.SummarizeProblems(problems)
	if len(kept) == 0 && repeats == 0 {
		w.reject(ctx, rw, http.StatusBadRequest, rejectBadTimestamp, cluster,
			fmt.Sprintf("all %d events have bad timestamps: %s", n, summary))
		return nil, "", false
	}
	if ok, suppressed := w.badLog.Allow(time.Now()); ok {
		w.logger.LogAttrs(ctx, slog.LevelWarn, "audit events dropped for their timestamps",
			slog.String("cluster", cluster), slog.Int("dropped", len(problems)), slog.Int("batch", n),
			slog.String("errors", clip.String(summary, maxReasonLen)), slog.Int("suppressedSinceLastLog", suppressed))
	}
	return kept, fmt.Sprintf(", dropped %d with bad timestamps: %s", len(problems), clip.String(summary, maxReasonLen)), true
}

// readBody reads the request body, decompressing gzip, within the size limit and within the
// in-flight byte budget. The caller must call res.release (res is never nil) once it no longer
// needs the bytes read, and may set res.reuse first when nothing refers to them any more. On error
// it returns the HTTP status to answer (400, 413, 415 or 429).
func (w *Webhook) readBody(rw http.ResponseWriter, r *http.Request) (data []byte, res *reservation, status int, err error) {
	res = &reservation{b: w.inflight}
	defer func() { res.reuse = err != nil }() // a body that could not be read is not used

	limit := w.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, res, http.StatusRequestEntityTooLarge,
			fmt.Errorf("body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
	}
	body := http.MaxBytesReader(rw, r.Body, limit)
	defer body.Close()

	var src io.Reader = body
	size := min(int64(4<<10), limit+1) // first buffer of a body of unknown length
	if r.ContentLength > 0 {
		size = r.ContentLength + 1 // one more byte to see EOF without growing
	}
	fallback := size
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		// Audit JSON compresses well: guess eight times the compressed size, and fall back to the
		// compressed size when the guess does not fit the budget.
		if r.ContentLength > 0 {
			size = min(r.ContentLength, limit/8)*8 + 1
		}
		// Take the first buffer's bytes before reading the gzip header.
		if !res.grow(size) {
			if !res.grow(fallback) {
				return nil, res, http.StatusTooManyRequests, w.busyError(fallback)
			}
			size = fallback
		}
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, res, readErrorStatus(err), fmt.Errorf("read gzip body: %w", err)
		}
		defer zr.Close()
		// Bound the decompressed size too: read at most one byte over the limit to detect it.
		src = io.LimitReader(zr, limit+1)
	default:
		return nil, res, http.StatusUnsupportedMediaType,
			fmt.Errorf("unsupported Content-Encoding %q (want gzip or none)", clip.String(enc, 40))
	}
	if res.held == 0 && !res.grow(size) {
		// Answered before reading: the sender keeps the batch and retries.
		return nil, res, http.StatusTooManyRequests, w.busyError(size)
	}

	data, err = readAllBudget(src, size, limit, res)
	if err != nil {
		if errors.Is(err, errNoBudget) {
			return nil, res, http.StatusTooManyRequests, w.busyError(int64(cap(data)))
		}
		if status := readErrorStatus(err); status == http.StatusRequestEntityTooLarge {
			return nil, res, status, fmt.Errorf("body is over the limit of %d bytes", limit)
		}
		return nil, res, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, res, http.StatusRequestEntityTooLarge,
			fmt.Errorf("decompressed body is over the limit of %d bytes", limit)
	}
	return data, res, 0, nil
}

// busyError is the reason of a 429 for a body that needed n more bytes than the budget had.
func (w *Webhook) busyError(n int64) error {
	return fmt.Errorf("too many request bytes in flight: %d more do not fit in audit.webhook.maxInflightBytes %d, retry later",
		n, w.cfg.MaxInflightBytes)
}

// readErrorStatus is the HTTP status for an error reading a body: 413 over the limit, else 400.
func readErrorStatus(err error) int {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// errNoBudget is returned by readAllBudget when a buffer could not grow within the budget.
var errNoBudget = errors.New("in-flight byte budget exhausted")

// readAllBudget reads r to the end into a buffer of size bytes (already taken from res), which it
// grows, taking the new buffer's bytes from res first, up to limit+1 bytes (one over the limit,
// for the caller to detect it). It returns errNoBudget when res cannot grow.
func readAllBudget(r io.Reader, size, limit int64, res *reservation) ([]byte, error) {
	buf, pooled := bodybuf.New(size)
	res.body = pooled
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf, nil
			}
			newCap := min(2*int64(cap(buf)), limit+1)
			if !res.grow(newCap) {
				return buf, errNoBudget
			}
			grown := make([]byte, len(buf), newCap)
			copy(grown, buf)
			res.shrink(int64(cap(buf)))
			res.body.Recycle() // copied: nothing refers to it
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// reject answers a refused batch with status and a one-line text/plain reason, counts it
// (kelemetry.audit.webhook.rejected by reason, kelemetry.audit.webhook.requests by code) and logs
// it without the body, rate-limited per reason: a client retrying a refused batch must not fill
// the log, so a line says how many of its reason were suppressed before it.
func (w *Webhook) reject(ctx context.Context, rw http.ResponseWriter, status int, reason, cluster, msg string) {
	msg = clip.String(strings.Join(strings.Fields(msg), " "), maxReasonLen)
	w.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	w.count(ctx, status)
	lim, ok := w.rejectLogs[reason]
	if !ok {
		lim = w.rejectLogs[rejectOther]
	}
	if ok, suppressed := lim.Allow(time.Now()); ok {
		w.logger.LogAttrs(ctx, slog.LevelWarn, "audit batch rejected",
			slog.Int("status", status), slog.String("reason", reason), slog.String("cluster", cluster),
			slog.String("error", msg), slog.Int("suppressedSinceLastLog", suppressed))
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(status)
	_, _ = io.WriteString(rw, msg+"\n")
}

func (w *Webhook) count(ctx context.Context, status int) {
	w.requests.Add(ctx, 1, metric.WithAttributes(attribute.Int("code", status)))
}

// meterName is the instrumentation scope of the webhook's metrics (the audit pipeline's).
const meterName = "github.com/kelemetry/kelemetry/audit"

// reasons are the attribute sets reason=R of a counter's reasons, exported at 0 from the start.
func reasons(rs ...string) []attribute.Set {
	out := make([]attribute.Set, len(rs))
	for i, r := range rs {
		out[i] = attribute.NewSet(attribute.String("reason", r))
	}
	return out
}
