package tap

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/clip"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults of ForwardConfig.
// maxTargetReason bounds what is kept of a target's answer to a refused batch.
const maxTargetReason = 512

const (
	defaultForwardMaxBufferBytes = 64 << 20
	defaultForwardTimeout        = 10 * time.Second
	defaultForwardMaxBackoff     = 10 * time.Second
	// maxRetryAfter caps how long a target's Retry-After may hold its batches.
	maxRetryAfter = 5 * time.Minute
)

// forwardClusterPlaceholder in a ForwardConfig.URL is replaced by the cluster of each batch.
const forwardClusterPlaceholder = "{cluster}"

// ForwardConfig configures one target of the audit forward (Forwarder): another audit webhook
// that receives each batch this webhook accepted.
type ForwardConfig struct {
	// URL is where batches are posted (http or https), such as
	// https://other:8080/audit/{cluster}: {cluster} is replaced by the batch's cluster.
	URL string `yaml:"url"`
	// CAFile verifies the target's certificate (PEM); empty: the system's roots.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are a client certificate and its key (PEM), both or neither.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// BearerTokenFile holds a token sent as "Authorization: Bearer"; read again for each request,
	// so a rotated token is picked up.
	BearerTokenFile string `yaml:"bearerTokenFile"`
	// MaxBufferBytes bounds the bytes of batches waiting for this target (default 64 MiB); a
	// batch that does not fit is dropped and counted (reason buffer_full).
	MaxBufferBytes int64 `yaml:"maxBufferBytes"`
	// Timeout bounds one request (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxBackoff caps the wait between retries (default 10s; a longer Retry-After is honoured up
	// to 5 minutes).
	MaxBackoff time.Duration `yaml:"maxBackoff"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c ForwardConfig) withDefaults() ForwardConfig {
	if c.MaxBufferBytes == 0 {
		c.MaxBufferBytes = defaultForwardMaxBufferBytes
	}
	if c.Timeout == 0 {
		c.Timeout = defaultForwardTimeout
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = defaultForwardMaxBackoff
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c ForwardConfig) Validate() error {
	u, err := url.Parse(strings.ReplaceAll(c.URL, forwardClusterPlaceholder, "c"))
	switch {
	case c.URL == "":
		return errors.New("audit forward: no url")
	case err != nil:
		return fmt.Errorf("audit forward url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("audit forward url %s: want http or https", u.Redacted())
	case u.Host == "":
		return fmt.Errorf("audit forward url %s: no host", u.Redacted())
	case (c.CertFile == "") != (c.KeyFile == ""):
		return fmt.Errorf("audit forward %s: certFile and keyFile go together", u.Redacted())
	case c.MaxBufferBytes < 0 || c.Timeout < 0 || c.MaxBackoff < 0:
		return fmt.Errorf("audit forward %s: negative maxBufferBytes, timeout or maxBackoff", u.Redacted())
	}
	return nil
}

// Reasons of kelemetry.audit.forward.dropped_batches and dropped_events.
const (
	forwardDropBufferFull = "buffer_full"
	forwardDropRefused    = "refused"
	forwardDropShutdown   = "shutdown"
	forwardDropStopped    = "stopped"
	forwardDropBadBatch   = "bad_batch"
)

// Forwarder is a BatchTap that posts each batch the webhook accepted to another audit webhook:
// the EventList as received, or, when the webhook dropped some items, a new EventList of the
// accepted ones. Batches wait in a buffer of their own (MaxBufferBytes) and are sent in order by
// one goroutine, so the webhook never waits for the target. A failed request (network error,
// timeout, 408, 429 or 5xx) is retried with exponential backoff (honouring Retry-After) until it
// succeeds or Stop gives up; while it is retried, new batches wait in the buffer, and those that
// do not fit are dropped and counted. A batch answered with another 4xx is dropped and counted
// (reason refused): sending it again would not help.
type Forwarder struct {
	cfg    ForwardConfig
	target string // the URL without credentials, for metrics and logs
	logger *slog.Logger
	client *http.Client
	q      *byteQueue

	batches   metric.Int64Counter
	events    metric.Int64Counter
	retries   metric.Int64Counter
	dropBatch metric.Int64Counter
	dropEv    metric.Int64Counter
	attrs     metric.MeasurementOption
	errLog    ratelog.Limiter

	group loop.Group
	abort atomic.Bool
	// kill cancels requests and waits once Stop's context ended.
	killCtx context.Context
	kill    context.CancelFunc
}

// NewForwarder returns a forwarder to cfg's target; ts gives its logger and meter provider
// (either may be unset). It reads the TLS files now.
func NewForwarder(cfg ForwardConfig, ts telemetry.Settings) (*Forwarder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	target := cfg.URL
	if u, err := url.Parse(cfg.URL); err == nil && u.User != nil {
		target = u.Redacted()
	}
	tlsCfg, err := forwardTLS(cfg)
	if err != nil {
		return nil, fmt.Errorf("audit forward %s: %w", target, err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsCfg
	fw := &Forwarder{cfg: cfg, target: target,
		logger: ts.Log().With("component", "audit.forward", "target", target),
		client: &http.Client{Transport: transport, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		q:      newByteQueue(cfg.MaxBufferBytes),
		attrs:  metric.WithAttributes(attribute.String("target", target)),
		errLog: ratelog.Limiter{Burst: 5, Every: 30 * time.Second}}
	fw.killCtx, fw.kill = context.WithCancel(context.Background())
	meter := instrument.NewMeter(ts, meterName)
	// The target is known here: its series are at 0 from the start, each reason included.
	targetSet := attribute.NewSet(attribute.String("target", target))
	var dropSets []attribute.Set
	for _, r := range []string{forwardDropBufferFull, forwardDropRefused, forwardDropShutdown, forwardDropStopped, forwardDropBadBatch} {
		dropSets = append(dropSets, attribute.NewSet(attribute.String("target", target), attribute.String("reason", r)))
	}
	fw.batches = meter.Counter("kelemetry.audit.forward.batches", "Audit batches forwarded (answered 2xx), by target.", "{batch}", targetSet)
	fw.events = meter.Counter("kelemetry.audit.forward.events", "Audit events forwarded, by target.", "{event}", targetSet)
	fw.retries = meter.Counter("kelemetry.audit.forward.retries", "Retried audit forward requests, by target.", "{request}", targetSet)
	fw.dropBatch = meter.Counter("kelemetry.audit.forward.dropped_batches",
		"Audit batches not forwarded, by target and reason (buffer_full, refused, shutdown, stopped, bad_batch).", "{batch}", dropSets...)
	fw.dropEv = meter.Counter("kelemetry.audit.forward.dropped_events",
		"Audit events not forwarded, by target and reason (as dropped_batches).", "{event}", dropSets...)
	meter.Gauge("kelemetry.audit.forward.buffer_bytes", "Bytes of audit batches waiting to be forwarded, by target.", "By",
		func() (int64, bool) { return fw.q.size(), true })
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("audit forward: %w", err)
	}
	return fw, nil
}

// forwardTLS builds the TLS client configuration of cfg (nil when it sets nothing).
func forwardTLS(cfg ForwardConfig) (*tls.Config, error) {
	if cfg.CAFile == "" && cfg.CertFile == "" {
		return nil, nil // no TLS settings: the transport's defaults
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s: no PEM certificate", cfg.CAFile)
		}
		c.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Target returns the target URL, without credentials.
func (fw *Forwarder) Target() string { return fw.target }

// Accepted buffers b for sending, or drops and counts it when the buffer is full. It never
// blocks.
func (fw *Forwarder) Accepted(ctx context.Context, b webhook.AcceptedBatch) {
	if err := fw.q.put(b); err != nil {
		reason := forwardDropBufferFull
		if errors.Is(err, errQueueClosed) {
			reason = forwardDropStopped
		}
		fw.drop(ctx, reason, b)
	}
}

func (fw *Forwarder) drop(ctx context.Context, reason string, b webhook.AcceptedBatch) {
	attrs := metric.WithAttributes(attribute.String("target", fw.target), attribute.String("reason", reason))
	fw.dropBatch.Add(ctx, 1, attrs)
	fw.dropEv.Add(ctx, int64(b.Events), attrs)
}

// Start starts sending. It does not block.
func (fw *Forwarder) Start(_ context.Context) error {
	fw.group.Start(fw.run)
	return nil
}

// Stop refuses new batches and keeps sending (and retrying) what is buffered until the buffer
// is empty or ctx ends; then the rest is dropped (counted, reason shutdown) and ctx's error
// returned. Stop is safe without Start and may be called more than once.
func (fw *Forwarder) Stop(ctx context.Context) error {
	fw.q.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = fw.group.Stop(context.Background(), "audit forward")
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		fw.abort.Store(true)
		fw.kill()
		<-done
		err = fmt.Errorf("audit forward %s: stop: %w", fw.target, ctx.Err())
	}
	fw.kill()
	for _, b := range fw.q.takeAll() {
		fw.drop(context.Background(), forwardDropShutdown, b)
	}
	fw.client.CloseIdleConnections()
	return err
}

func (fw *Forwarder) run(ctx context.Context) {
	for {
		for !fw.abort.Load() {
			b, ok := fw.q.peek()
			if !ok {
				break
			}
			fw.send(b)
			fw.q.pop()
		}
		if fw.abort.Load() {
			return
		}
		select {
		case <-fw.q.wake:
		case <-ctx.Done():
			if _, ok := fw.q.peek(); !ok {
				return
			}
		}
	}
}

// send posts b until it is answered 2xx or refused, or Stop aborts.
func (fw *Forwarder) send(b webhook.AcceptedBatch) {
	ctx := fw.killCtx
	body, err := forwardBody(b)
	if err != nil {
		fw.logFailure("cannot forward a batch", err)
		fw.drop(ctx, forwardDropBadBatch, b)
		return
	}
	u := strings.ReplaceAll(fw.cfg.URL, forwardClusterPlaceholder, url.PathEscape(b.Cluster))
	policy := backoff.Policy{Max: fw.cfg.MaxBackoff}
	for attempt := 0; ; attempt++ {
		if fw.abort.Load() {
			fw.drop(context.Background(), forwardDropShutdown, b)
			return
		}
		retry, wait, err := fw.post(ctx, u, body)
		switch {
		case err == nil:
			fw.batches.Add(ctx, 1, fw.attrs)
			fw.events.Add(ctx, int64(b.Events), fw.attrs)
			return
		case !retry:
			fw.logFailure("audit batch refused by the forward target", err)
			fw.drop(ctx, forwardDropRefused, b)
			return
		}
		fw.logFailure("audit forward failed, retrying", err)
		fw.retries.Add(context.Background(), 1, fw.attrs)
		if wait <= 0 {
			wait = policy.Delay(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// post sends one request. It reports whether a failure may be retried, and the target's
// Retry-After (zero if none).
func (fw *Forwarder) post(ctx context.Context, u string, body []byte) (retry bool, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if fw.cfg.BearerTokenFile != "" {
		tok, err := os.ReadFile(fw.cfg.BearerTokenFile)
		if err != nil {
			return true, 0, fmt.Errorf("read bearerTokenFile: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := fw.client.Do(req)
	if err != nil {
		return true, 0, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	reason, _ := io.ReadAll(io.LimitReader(resp.Body, maxTargetReason))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, 0, nil
	}
	err = fmt.Errorf("answered %d: %s", resp.StatusCode, clip.String(strings.TrimSpace(string(reason)), maxTargetReason))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout,
		resp.StatusCode >= 500:
		return true, retryAfter(resp.Header.Get("Retry-After"), time.Now()), err
	default:
		return false, 0, err
	}
}

// retryAfter parses a Retry-After value (seconds or an HTTP date), capped at maxRetryAfter;
// zero when absent or unparsable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		d = time.Duration(min(s, int64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(0, min(d, maxRetryAfter))
}

func (fw *Forwarder) logFailure(msg string, err error) {
	if ok, suppressed := fw.errLog.Allow(time.Now()); ok {
		fw.logger.Warn(msg, "error", err, "suppressedSinceLastLog", suppressed)
	}
}

// forwardBody is the body to post for b: the body as received when the webhook kept every item,
// else an EventList of the accepted items.
func forwardBody(b webhook.AcceptedBatch) ([]byte, error) {
	if len(b.Dropped) == 0 {
		return b.Body, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(b.Body))
	buf.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`)
	first := true
	err := eachItem(b.Body, b.Dropped, b.Events+len(b.Dropped), func(raw []byte) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(raw)
		return nil
	})
	if err != nil {
		return nil, err
	}
	buf.WriteString("]}")
	return buf.Bytes(), nil
}
