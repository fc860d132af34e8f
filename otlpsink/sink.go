package otlpsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Errors returned by Export, checked with errors.Is.
var (
	// ErrQueueFull means the queue stayed full for EnqueueTimeout and spans were dropped.
	ErrQueueFull = errors.New("otlp queue full")
	// ErrStopped means Stop was called and spans were dropped.
	ErrStopped = errors.New("otlp sink stopped")
)

// Reasons of dropped spans, the "reason" attribute of kelemetry.otlp.spans.dropped.
const (
	ReasonQueueFull    = "queue_full"    // the queue stayed full for EnqueueTimeout, or ctx ended
	ReasonExportFailed = "export_failed" // every attempt to send the batch failed
	ReasonStopped      = "stopped"       // Export after Stop, or Stop's ctx ended before the flush
)

const meterName = "github.com/kelemetry/kelemetry/otlpsink"

// logEvery limits how often queue-full drops are logged.
const logEvery = 10 * time.Second

// Sink sends spans to an OTLP endpoint. Create it with New or NewWithExporter, call Start to run
// the worker and Stop to flush and shut down.
type Sink struct {
	cfg      Config
	exporter sdktrace.SpanExporter
	logger   *slog.Logger
	queue    chan *aggregator.Span
	conv     *converter

	// mu is held shared by Export while it enqueues and exclusively by Stop to end enqueuing.
	mu      sync.RWMutex
	stopped bool

	lifeMu      sync.Mutex
	stopping    bool
	worker      loop.Group         // run; cancelling its ctx asks it to flush and return
	cancelSends context.CancelFunc // cancels the sends of the worker (Stop's ctx ended)

	lastDropLog atomic.Int64 // unix nanos

	exported     metric.Int64Counter
	dropped      metric.Int64Counter
	queueReg     metric.Registration
	byQueueFull  metric.MeasurementOption
	byExportFail metric.MeasurementOption
	byStopped    metric.MeasurementOption
}

// New creates a sink that exports with the OTLP gRPC or HTTP exporter configured by cfg. No
// connection is made yet.
func New(ctx context.Context, cfg Config, tel telemetry.Settings) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, cfg.WithDefaults())
	if err != nil {
		return nil, fmt.Errorf("otlpsink: create %s exporter: %w", cfg.WithDefaults().Protocol, err)
	}
	s, err := NewWithExporter(cfg, exp, tel)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	return s, nil
}

func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	gzip := cfg.Compression == "gzip"
	if cfg.Protocol == ProtocolHTTP {
		// Retries are the sink's own.
		opts := []otlptracehttp.Option{
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
			otlptracehttp.WithTimeout(cfg.Timeout),
		}
		switch {
		case isURL(cfg.Endpoint):
			u, err := url.Parse(cfg.Endpoint)
			if err != nil {
				return nil, fmt.Errorf("endpoint: %w", err)
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		if gzip {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
		otlptracegrpc.WithTimeout(cfg.Timeout),
	}
	switch {
	case isURL(cfg.Endpoint):
		opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	case cfg.Endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	if gzip {
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	}
	return otlptracegrpc.New(ctx, opts...)
}

// NewWithExporter creates a sink that sends through exporter, which Stop shuts down. The
// connection fields of cfg (Endpoint, Protocol, Insecure, Headers, Compression) are ignored.
func NewWithExporter(cfg Config, exporter sdktrace.SpanExporter, tel telemetry.Settings) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if exporter == nil {
		return nil, errors.New("otlpsink: nil exporter")
	}
	cfg = cfg.WithDefaults()
	logger := tel.Log()
	s := &Sink{
		cfg:      cfg,
		exporter: exporter,
		logger:   logger.With("sink", "otlp", "endpoint", cfg.Endpoint),
		queue:    make(chan *aggregator.Span, cfg.QueueSize),
		conv:     newConverter(),
	}
	if err := s.initMetrics(tel); err != nil {
		return nil, fmt.Errorf("otlpsink: metrics: %w", err)
	}
	return s, nil
}

func (s *Sink) initMetrics(tel telemetry.Settings) error {
	m := tel.Meter(meterName)
	s.exported = m.Counter("kelemetry.otlp.spans.exported", "Spans sent to the OTLP endpoint.", "{span}")
	s.dropped = m.Counter("kelemetry.otlp.spans.dropped", "Spans not sent to the OTLP endpoint, by reason.", "{span}")
	s.queueReg = m.Gauge("kelemetry.otlp.queue.size", "Spans waiting to be sent.", "{span}",
		func() (int64, bool) { return int64(len(s.queue)), true })
	s.byQueueFull = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", ReasonQueueFull)))
	s.byExportFail = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", ReasonExportFailed)))
	s.byStopped = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", ReasonStopped)))
	return m.Err()
}

// Export enqueues spans. When the queue is full it waits up to EnqueueTimeout, or until ctx
// ends, then drops the spans that did not fit, counts them and returns an error wrapping
// ErrQueueFull (and ctx's error if it ended). After Stop it drops everything and returns an
// error wrapping ErrStopped.
func (s *Sink) Export(ctx context.Context, spans []*aggregator.Span) error {
	if len(spans) == 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		s.dropped.Add(ctx, int64(len(spans)), s.byStopped)
		return fmt.Errorf("otlpsink: dropped %d spans: %w", len(spans), ErrStopped)
	}
	var timeout <-chan time.Time
	for i, sp := range spans {
		select {
		case s.queue <- sp:
			continue
		default:
		}
		if timeout == nil {
			if s.cfg.EnqueueTimeout < 0 {
				return s.dropQueueFull(ctx, len(spans)-i, len(spans), nil)
			}
			t := time.NewTimer(s.cfg.EnqueueTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case s.queue <- sp:
		case <-timeout:
			return s.dropQueueFull(ctx, len(spans)-i, len(spans), nil)
		case <-ctx.Done():
			return s.dropQueueFull(ctx, len(spans)-i, len(spans), ctx.Err())
		}
	}
	return nil
}

func (s *Sink) dropQueueFull(ctx context.Context, n, total int, cause error) error {
	s.dropped.Add(context.WithoutCancel(ctx), int64(n), s.byQueueFull)
	now := time.Now().UnixNano()
	if last := s.lastDropLog.Load(); now-last >= int64(logEvery) && s.lastDropLog.CompareAndSwap(last, now) {
		s.logger.Warn("otlp queue full, dropping spans", "dropped", n, "queueSize", s.cfg.QueueSize)
	}
	err := fmt.Errorf("otlpsink: dropped %d of %d spans: %w", n, total, ErrQueueFull)
	if cause != nil {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// Start runs the worker that sends batches. It does not block. Calling it again, or after
// Stop, does nothing.
func (s *Sink) Start(_ context.Context) error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.stopping || s.worker.Running() {
		return nil
	}
	sendCtx, cancel := context.WithCancel(context.Background())
	s.cancelSends = cancel
	s.worker.Start(func(stop context.Context) { s.run(stop, sendCtx) })
	return nil
}

// Stop stops accepting spans, sends what is queued and shuts the exporter down. If ctx ends
// first, the spans not yet sent are dropped and counted. No goroutine of the sink outlives it.
// Safe without Start; later calls do nothing.
func (s *Sink) Stop(ctx context.Context) error {
	s.lifeMu.Lock()
	if s.stopping {
		s.lifeMu.Unlock()
		return nil
	}
	s.stopping = true
	started := s.worker.Running()
	s.lifeMu.Unlock()

	// Wait for Exports in flight; later ones see stopped.
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()

	var errs []error
	if started {
		if err := s.worker.Stop(ctx, "flush"); err != nil {
			s.cancelSends() // drop the rest: the worker returns promptly
			_ = s.worker.Stop(context.Background(), "flush")
			errs = append(errs, fmt.Errorf("flush: %w", ctx.Err()))
		}
		s.cancelSends()
	} else {
		if err := s.flush(ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		}
	}
	if err := s.queueReg.Unregister(); err != nil {
		errs = append(errs, fmt.Errorf("unregister queue gauge: %w", err))
	}
	if err := s.exporter.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down exporter: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("otlpsink: stop: %w", err)
	}
	return nil
}

// run is the worker: it sends a batch when it is full or FlushInterval after its first span.
// When stop ends it flushes and returns; its sends use ctx.
func (s *Sink) run(stop, ctx context.Context) {
	batch := make([]*aggregator.Span, 0, s.cfg.BatchSize)
	timer := time.NewTimer(s.cfg.FlushInterval)
	timer.Stop()
	defer timer.Stop()
	var due <-chan time.Time
	for {
		select {
		case sp := <-s.queue:
			batch = append(batch, sp)
			if len(batch) == 1 {
				timer.Reset(s.cfg.FlushInterval)
				due = timer.C
			}
			if len(batch) < s.cfg.BatchSize {
				continue
			}
			timer.Stop()
		case <-due:
		case <-stop.Done():
			_ = s.flush(ctx, batch)
			return
		}
		due = nil
		s.send(ctx, batch)
		clear(batch)
		batch = batch[:0]
	}
}

// flush sends batch and everything queued, in batches. Nothing is enqueued any more.
func (s *Sink) flush(ctx context.Context, batch []*aggregator.Span) error {
	for {
		select {
		case sp := <-s.queue:
			batch = append(batch, sp)
			if len(batch) < s.cfg.BatchSize {
				continue
			}
		default:
			if len(batch) > 0 {
				s.send(ctx, batch)
			}
			return ctx.Err()
		}
		s.send(ctx, batch)
		batch = batch[:0]
	}
}

// send exports one batch, retrying with backoff, and counts the outcome.
func (s *Sink) send(ctx context.Context, batch []*aggregator.Span) {
	mctx := context.WithoutCancel(ctx)
	if ctx.Err() != nil {
		s.dropped.Add(mctx, int64(len(batch)), s.byStopped)
		return
	}
	spans := make([]sdktrace.ReadOnlySpan, len(batch))
	for i, sp := range batch {
		spans[i] = s.conv.span(sp)
	}
	backoff := s.cfg.RetryBackoff
	attempts := 0
	var err error
	for {
		attempts++
		if err = s.exportOnce(ctx, spans); err == nil {
			s.exported.Add(mctx, int64(len(spans)))
			return
		}
		if attempts > s.cfg.MaxRetries || ctx.Err() != nil {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
	reason := s.byExportFail
	if ctx.Err() != nil {
		reason = s.byStopped
	}
	s.dropped.Add(mctx, int64(len(spans)), reason)
	s.logger.Warn("otlp export failed, dropping batch", "spans", len(spans), "attempts", attempts, "error", err)
}

func (s *Sink) exportOnce(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.exporter.ExportSpans(ctx, spans)
}
