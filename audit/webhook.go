package audit

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// DefaultWebhookMaxBodyBytes is the default limit of a webhook request body, after decompression.
const DefaultWebhookMaxBodyBytes = 32 << 20

// webhookRetryAfter is the Retry-After value, in seconds, of a 429 answer.
const webhookRetryAfter = "1"

// maxReasonLen bounds the reason sent back to the client and logged.
const maxReasonLen = 512

// WebhookConfig configures a Webhook. The zero value means defaults.
type WebhookConfig struct {
	// DefaultCluster names the cluster of batches posted to /audit. Batches posted to
	// /audit/{cluster} name their own. If empty, posts to /audit are refused (400).
	DefaultCluster string `yaml:"defaultCluster"`
	// MaxBodyBytes limits a request body, after gzip decompression (default 32 MiB). A larger
	// body is refused (413).
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c WebhookConfig) WithDefaults() WebhookConfig {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultWebhookMaxBodyBytes
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c WebhookConfig) Validate() error {
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("webhook maxBodyBytes %d is negative", c.MaxBodyBytes)
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
// enqueued, 429 with Retry-After when the queue is full (kube-apiserver retries), 503 when the
// queue is stopped (or, with Retry-After, while the sinks are unhealthy: see SetHealth), 400 for a malformed batch and 413 for one over the size limit.
//
// The cluster comes from the path, else from DefaultCluster; never from the client's address or
// headers. The handler does not filter events (the consumer does). Each request body is read into
// a buffer of its own that the enqueued events alias (see DecodeEventList) and that is never
// reused.
type Webhook struct {
	cfg    WebhookConfig
	q      Enqueuer
	logger *slog.Logger
	health func(context.Context) error // see SetHealth

	requests metric.Int64Counter
	events   metric.Int64Counter
	rejected metric.Int64Counter
}

// Reasons of rejected batches, the reason attribute of kelemetry.audit.webhook.rejected.
const (
	rejectBadRequest = "bad_request"
	rejectTooLarge   = "too_large"
	rejectQueueFull  = "queue_full"
	rejectStopped    = "stopped"
	rejectError      = "error"
)

// NewWebhook returns a webhook handler that enqueues into q. cfg should be valid (see Validate);
// defaults fill its zero fields. ts gives its logger and meter provider (either may be unset).
// An instrument that cannot be created is logged and replaced by a no-op one.
func NewWebhook(cfg WebhookConfig, q Enqueuer, ts telemetry.Settings) *Webhook {
	w := &Webhook{cfg: cfg.WithDefaults(), q: q, logger: ts.Log().With("component", "audit-webhook")}
	meter := ts.Meter(meterName)
	w.requests = meter.Counter("kelemetry.audit.webhook.requests",
		"Audit webhook requests, by HTTP status code.", "{request}")
	w.events = meter.Counter("kelemetry.audit.webhook.events",
		"Audit events accepted by the webhook (enqueued).", "{event}")
	w.rejected = meter.Counter("kelemetry.audit.webhook.rejected",
		"Audit webhook batches rejected, by reason (bad_request, too_large, queue_full, stopped, unavailable, error).", "{batch}")
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

	data, status, err := w.readBody(rw, r)
	if err != nil {
		reason := rejectBadRequest
		if status == http.StatusRequestEntityTooLarge {
			reason = rejectTooLarge
		}
		w.reject(ctx, rw, status, reason, cluster, err.Error())
		return
	}

	events, err := DecodeEventList(data)
	if err != nil {
		w.reject(ctx, rw, http.StatusBadRequest, rejectBadRequest, cluster, err.Error())
		return
	}

	if len(events) > 0 {
		if err := w.q.Enqueue(ctx, cluster, events); err != nil {
			switch {
			case errors.Is(err, ErrBatchTooLarge):
				// Retrying cannot help: say so rather than asking for a retry.
				w.reject(ctx, rw, http.StatusRequestEntityTooLarge, rejectTooLarge, cluster,
					fmt.Sprintf("enqueue %d events: %v (raise audit.queue.capacity or lower --audit-webhook-batch-max-size)", len(events), err))
			case errors.Is(err, ErrQueueFull):
				rw.Header().Set("Retry-After", webhookRetryAfter)
				w.reject(ctx, rw, http.StatusTooManyRequests, rejectQueueFull, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(events), err))
			case errors.Is(err, ErrStopped):
				w.reject(ctx, rw, http.StatusServiceUnavailable, rejectStopped, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(events), err))
			default:
				w.reject(ctx, rw, http.StatusInternalServerError, rejectError, cluster,
					fmt.Sprintf("enqueue %d events: %v", len(events), err))
			}
			return
		}
	}

	w.events.Add(ctx, int64(len(events)))
	w.count(ctx, http.StatusOK)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(rw, "accepted "+strconv.Itoa(len(events))+" events\n")
}

// readBody reads the request body, decompressing gzip, within the size limit. On error it returns
// the HTTP status to answer (400, 413 or 415).
func (w *Webhook) readBody(rw http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	limit := w.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
	}
	body := http.MaxBytesReader(rw, r.Body, limit)
	defer body.Close()

	var src io.Reader = body
	hint := r.ContentLength
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, readErrorStatus(err), fmt.Errorf("read gzip body: %w", err)
		}
		defer zr.Close()
		// Bound the decompressed size too: read at most one byte over the limit to detect it.
		src = io.LimitReader(zr, limit+1)
		if hint > limit/8 {
			hint = limit
		} else if hint > 0 {
			hint *= 8 // audit JSON compresses well
		}
	default:
		return nil, http.StatusUnsupportedMediaType,
			fmt.Errorf("unsupported Content-Encoding %q (want gzip or none)", truncate(enc, 40))
	}

	data, err := readAllHint(src, hint)
	if err != nil {
		if status := readErrorStatus(err); status == http.StatusRequestEntityTooLarge {
			return nil, status, fmt.Errorf("body is over the limit of %d bytes", limit)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, http.StatusRequestEntityTooLarge,
			fmt.Errorf("decompressed body is over the limit of %d bytes", limit)
	}
	return data, 0, nil
}

// readErrorStatus is the HTTP status for an error reading a body: 413 over the limit, else 400.
func readErrorStatus(err error) int {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// readAllHint reads r to the end into a buffer sized by hint (a non-positive hint means unknown),
// so that a body of known length is read without regrowing.
func readAllHint(r io.Reader, hint int64) ([]byte, error) {
	size := int64(4 << 10)
	if hint > 0 {
		size = hint + 1 // one more byte to see EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // let append pick the new capacity
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

// reject answers a refused batch with status and a one-line text/plain reason, counts it and logs
// it (without the body).
func (w *Webhook) reject(ctx context.Context, rw http.ResponseWriter, status int, reason, cluster, msg string) {
	msg = truncate(strings.Join(strings.Fields(msg), " "), maxReasonLen)
	w.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	w.count(ctx, status)
	w.logger.LogAttrs(ctx, slog.LevelWarn, "audit batch rejected",
		slog.Int("status", status), slog.String("reason", reason), slog.String("cluster", cluster),
		slog.String("error", msg))
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(status)
	_, _ = io.WriteString(rw, msg+"\n")
}

func (w *Webhook) count(ctx context.Context, status int) {
	w.requests.Add(ctx, 1, metric.WithAttributes(attribute.Int("code", status)))
}

// truncate shortens s to at most n bytes (plus an ellipsis), at a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // do not cut a multi-byte character
		n--
	}
	return s[:n] + "..."
}
