package otlpsink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Errors returned by Export and Health, checked with errors.Is.
var (
	// errNotSynced is wrapped by Sync's error when spans it covers were dropped (refused by the
	// receiver, retries given up, or the sink stopped) or could not be sent before its ctx ended.
	errNotSynced = errors.New("otlp spans not synced")
	// errQueueFull means the queue stayed full for EnqueueTimeout. Without DropWhenFull the
	// error also wraps aggregator.ErrSinkBusy: nothing was dropped and the caller should retry;
	// with DropWhenFull the spans were dropped and counted.
	errQueueFull = errors.New("otlp queue full")
	// errStopped means Stop was called and spans were dropped.
	errStopped = errors.New("otlp sink stopped")
)

// Reasons of dropped spans, the "reason" attribute of kelemetry.otlp.spans.dropped.
const (
	reasonQueueFull    = "queue_full"    // the queue was full and DropWhenFull is set
	reasonExportFailed = "export_failed" // MaxRetries retries of the batch failed
	reasonStopped      = "stopped"       // Export after Stop, or Stop's ctx ended before the flush
	reasonRejected     = "rejected"      // the receiver refused them for good (invalid, unauthenticated, partial success)
)

const meterName = "github.com/kelemetry/kelemetry/otlpsink"

// logEvery limits how often full-queue and failed-export messages are logged.
const logEvery = 10 * time.Second

// busyFill is the share of either queue bound above which Health reports the sink busy, so that
// the webhook pushes back before Export has to refuse.
const busyFill = 0.9

// Sink sends spans to an OTLP endpoint. Create it with New or NewWithExporter, call Start to run
// the worker and Stop to flush and shut down.
type Sink struct {
	cfg      Config
	exporter sdktrace.SpanExporter
	logger   *slog.Logger
	queue    *spanQueue
	conv     *converter
	// upload, when set (New), sends the requests pconv builds from the spans, skipping the
	// exporter's conversion of conv's SDK spans; the exporter then only starts and stops it.
	upload func(context.Context, []*tracepb.ResourceSpans) error
	pconv  *protoConverter
	// uploadRaw, when set (New, gRPC to an endpoint given in the configuration), sends the
	// requests wenc encodes itself over conn, which Stop closes; likewise OTLP/HTTP to an
	// endpoint given in the configuration, without conn.
	uploadRaw func(context.Context, []byte) error
	wenc      *wireEncoder
	conn      *grpc.ClientConn
	closeIdle func() // the OTLP/HTTP client's, at Stop

	// mu is held shared by Export while it enqueues and exclusively by Stop to end enqueuing.
	mu      sync.RWMutex
	stopped bool

	lifeMu      sync.Mutex
	stopping    bool
	worker      loop.Group         // run; cancelling its ctx asks it to flush and return
	cancelSends context.CancelFunc // cancels the sends of the worker (Stop's ctx ended)

	lastFullLog   atomic.Int64 // unix nanos
	lastFailLog   time.Time    // worker only
	lastRejectLog time.Time    // worker only
	failing       atomic.Bool  // the last send attempt failed

	// dropMu guards dropEnd and syncFloor, which let Sync report spans dropped after they were
	// queued (positions as counted by the queue).
	dropMu    sync.Mutex
	dropEnd   uint64 // the position after the last queued span dropped (0: none yet)
	syncFloor uint64 // the highest position a finished Sync covered

	exported     metric.Int64Counter
	dropped      metric.Int64Counter
	refused      metric.Int64Counter
	failures     metric.Int64Counter
	queueReg     metric.Registration
	byQueueFull  metric.MeasurementOption
	byExportFail metric.MeasurementOption
	byStopped    metric.MeasurementOption
	byRejected   metric.MeasurementOption
}

// New creates a sink that exports with the OTLP gRPC or HTTP exporter configured by cfg. No
// connection is made yet.
func New(ctx context.Context, cfg Config, tel telemetry.Settings) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t, err := cfg.target()
	if err != nil {
		return nil, err
	}
	conn, err := newConn(cfg, t)
	if err != nil {
		return nil, fmt.Errorf("otlpsink: connect to %s: %w", t, err)
	}
	exp, client, err := newExporter(ctx, cfg, t, conn)
	if err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return nil, fmt.Errorf("otlpsink: create exporter for %s: %w", t, err)
	}
	s, err := NewWithExporter(cfg, exp, tel)
	if err != nil {
		_ = exp.Shutdown(ctx)
		if conn != nil {
			_ = conn.Close()
		}
		return nil, err
	}
	switch {
	case conn != nil:
		var callOpts []grpc.CallOption
		if cfg.Compression == "gzip" {
			callOpts = append(callOpts, grpc.UseCompressor(grpcgzip.Name))
		}
		s.uploadRaw, s.wenc, s.conn = grpcUpload(conn, cfg.Headers, callOpts...), &wireEncoder{}, conn
	case t.protocol == protocolHTTP && t.hostPort != "" && !t.fromEnv:
		var tc *tls.Config
		scheme := "http"
		if t.tls {
			if tc, err = cfg.TLS.ClientConfig(); err != nil {
				_ = exp.Shutdown(ctx)
				return nil, err
			}
			scheme = "https"
		}
		hc := newHTTPClient(tc)
		s.uploadRaw, s.wenc = httpUpload(hc, scheme+"://"+t.hostPort+t.path, cfg.Headers, cfg.Compression == "gzip"), &wireEncoder{}
		s.closeIdle = hc.CloseIdleConnections
	default:
		s.upload, s.pconv = client.UploadTraces, newProtoConverter()
	}
	s.logger = s.logger.With("target", t.String())
	s.logger.Info("exporting spans over OTLP", "protocol", t.protocol, "tls", t.tls)
	return s, nil
}

// ClientConfig builds the client TLS configuration c describes (CA, client certificate, server
// name), whether or not TLS is enabled.
func (c TLSConfig) ClientConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} // InsecureSkipVerify: opt-in, documented as for tests
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.caFile %s: no PEM certificate in it", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// newConn returns the gRPC connection to the endpoint of t that the sink sends its own encoded
// requests over (wireEncoder), or nil: for OTLP/HTTP, and for an endpoint taken from the
// OTEL_EXPORTER_OTLP_* environment, which the SDK's exporter reads itself.
func newConn(cfg Config, t target) (*grpc.ClientConn, error) {
	if t.protocol == protocolHTTP || t.hostPort == "" || t.fromEnv {
		return nil, nil
	}
	creds := insecure.NewCredentials()
	if t.tls {
		tc, err := cfg.TLS.ClientConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	return grpc.NewClient(t.hostPort, grpc.WithTransportCredentials(creds), grpc.WithUserAgent("kelemetry-otlpsink"))
}

// newExporter returns the SDK's OTLP exporter for t and the client it sends with, which the sink
// hands the requests it builds itself (protoConverter). With conn (newConn) the client uses it.
func newExporter(ctx context.Context, cfg Config, t target, conn *grpc.ClientConn) (sdktrace.SpanExporter, otlptrace.Client, error) {
	var tc *tls.Config
	if t.tls {
		var err error
		if tc, err = cfg.TLS.ClientConfig(); err != nil {
			return nil, nil, err
		}
	}
	plain := !t.tls && (!t.fromEnv || cfg.Insecure)
	gzip := cfg.Compression == "gzip"
	if t.protocol == protocolHTTP {
		// Retries are the sink's own.
		opts := []otlptracehttp.Option{
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
			otlptracehttp.WithTimeout(cfg.Timeout),
		}
		if t.hostPort != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(t.hostPort), otlptracehttp.WithURLPath(t.path))
		}
		switch {
		case tc != nil:
			opts = append(opts, otlptracehttp.WithTLSClientConfig(tc))
		case plain:
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		if gzip {
			opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		}
		client := otlptracehttp.NewClient(opts...)
		exp, err := otlptrace.New(ctx, client)
		return exp, client, err
	}
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
		otlptracegrpc.WithTimeout(cfg.Timeout),
	}
	if conn != nil {
		opts = append(opts, otlptracegrpc.WithGRPCConn(conn))
	}
	if t.hostPort != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(t.hostPort))
	}
	switch {
	case tc != nil:
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tc)))
	case plain:
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
	}
	if gzip {
		opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
	}
	client := otlptracegrpc.NewClient(opts...)
	exp, err := otlptrace.New(ctx, client)
	return exp, client, err
}

// NewWithExporter creates a sink that sends through exporter, which Stop shuts down. The
// connection fields of cfg (Endpoint, Protocol, Insecure, TLS, Headers, Compression) are only
// validated.
func NewWithExporter(cfg Config, exporter sdktrace.SpanExporter, tel telemetry.Settings) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if exporter == nil {
		return nil, errors.New("otlpsink: nil exporter")
	}
	cfg = cfg.withDefaults()
	logger := tel.Log()
	s := &Sink{
		cfg:      cfg,
		exporter: exporter,
		logger:   logger.With("sink", "otlp", "endpoint", cfg.Endpoint),
		queue:    newSpanQueue(cfg.QueueSize, cfg.MaxQueueBytes, cfg.BatchSize),
		conv:     newConverter(),
	}
	if err := s.initMetrics(tel); err != nil {
		return nil, fmt.Errorf("otlpsink: metrics: %w", err)
	}
	return s, nil
}

func (s *Sink) initMetrics(tel telemetry.Settings) error {
	m := instrument.NewMeter(tel, meterName)
	s.exported = m.Counter("kelemetry.otlp.spans.exported", "Spans sent to the OTLP endpoint.", "{span}", *attribute.EmptySet())
	s.dropped = m.Counter("kelemetry.otlp.spans.dropped", "Spans not sent to the OTLP endpoint, by reason.", "{span}",
		attribute.NewSet(attribute.String("reason", reasonQueueFull)), attribute.NewSet(attribute.String("reason", reasonExportFailed)),
		attribute.NewSet(attribute.String("reason", reasonStopped)), attribute.NewSet(attribute.String("reason", reasonRejected)))
	s.refused = m.Counter("kelemetry.otlp.spans.refused", "Spans refused by Export because the queue was full (the sender retries them; not lost).", "{span}", *attribute.EmptySet())
	s.failures = m.Counter("kelemetry.otlp.export.failures", "Failed attempts to send a batch (it is retried).", "{attempt}", *attribute.EmptySet())
	s.queueReg = m.Gauge("kelemetry.otlp.queue.size", "Spans waiting to be sent.", "{span}",
		func() (int64, bool) { n, _ := s.queue.size(); return int64(n), true })
	s.byQueueFull = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonQueueFull)))
	s.byExportFail = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonExportFailed)))
	s.byStopped = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonStopped)))
	s.byRejected = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", reasonRejected)))
	return m.Err()
}

// Health implements aggregator.HealthChecker: while the queue is more than 90% full (by spans or
// bytes) it returns an error wrapping aggregator.ErrSinkBusy, so the audit webhook answers 429
// and kube-apiserver keeps its batches. With DropWhenFull it always returns nil.
func (s *Sink) Health(context.Context) error {
	if s.cfg.DropWhenFull {
		return nil
	}
	n, b := s.queue.size()
	if float64(n) < busyFill*float64(s.cfg.QueueSize) && float64(b) < busyFill*float64(s.cfg.MaxQueueBytes) {
		return nil
	}
	state := "slow"
	if s.failing.Load() {
		state = "failing"
	}
	return fmt.Errorf("otlpsink: %d spans (%d bytes) queued, the receiver is %s: %w", n, b, state, aggregator.ErrSinkBusy)
}

// Export enqueues spans, all or none. When they do not fit it waits up to EnqueueTimeout, or
// until ctx ends, for room. Then, without DropWhenFull, it keeps none of them (counted in
// kelemetry.otlp.spans.refused) and returns an error wrapping errQueueFull and
// aggregator.ErrSinkBusy, so that the caller retries; with DropWhenFull it drops them, counts
// them and returns an error wrapping errQueueFull. After Stop it drops everything and returns
// an error wrapping errStopped.
func (s *Sink) Export(ctx context.Context, spans []*aggregator.Span) error {
	if len(spans) == 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopped {
		s.dropped.Add(context.WithoutCancel(ctx), int64(len(spans)), s.byStopped)
		return fmt.Errorf("otlpsink: dropped %d spans: %w", len(spans), errStopped)
	}
	ok, room := s.queue.push(spans)
	if ok {
		return nil
	}
	var cause error
	if s.cfg.EnqueueTimeout >= 0 {
		t := time.NewTimer(s.cfg.EnqueueTimeout)
		defer t.Stop()
	wait:
		for {
			select {
			case <-room:
				if ok, room = s.queue.push(spans); ok {
					return nil
				}
			case <-t.C:
				break wait
			case <-ctx.Done():
				cause = ctx.Err()
				break wait
			}
		}
	}
	return s.full(ctx, len(spans), cause)
}

// full accounts for spans that did not fit and returns Export's error.
func (s *Sink) full(ctx context.Context, n int, cause error) error {
	mctx := context.WithoutCancel(ctx)
	verb := "refused"
	var err error
	if s.cfg.DropWhenFull {
		verb = "dropped"
		s.dropped.Add(mctx, int64(n), s.byQueueFull)
		err = fmt.Errorf("otlpsink: dropped %d spans: %w", n, errQueueFull)
	} else {
		s.refused.Add(mctx, int64(n))
		err = fmt.Errorf("otlpsink: refused %d spans, retry later: %w (%w)", n, errQueueFull, aggregator.ErrSinkBusy)
	}
	now := time.Now().UnixNano()
	if last := s.lastFullLog.Load(); now-last >= int64(logEvery) && s.lastFullLog.CompareAndSwap(last, now) {
		queued, bytes := s.queue.size()
		s.logger.Warn("otlp queue full, "+verb+" spans", "spans", n, "queued", queued, "queuedBytes", bytes,
			"queueSize", s.cfg.QueueSize, "maxQueueBytes", s.cfg.MaxQueueBytes, "receiverFailing", s.failing.Load())
	}
	if cause != nil {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

var _ aggregator.Syncer = (*Sink)(nil)

// Sync implements aggregator.Syncer: it has every span Export accepted before the call sent at
// once (without waiting for a full batch or FlushInterval) and returns nil once the receiver
// acknowledged them all. It returns an error wrapping errNotSynced when ctx ends first (the
// receiver is down or slow: retries go on in the background), when the sink is not started,
// or when spans were dropped since the previous Sync (refused for good by the receiver,
// MaxRetries reached, or stopped): the caller must then keep its input for a retry, as
// re-exporting is harmless. The audit queues call it before they acknowledge a batch.
func (s *Sink) Sync(ctx context.Context) error {
	s.dropMu.Lock()
	floor := s.syncFloor
	s.dropMu.Unlock()
	to := s.queue.flushAll()
	for {
		done, removed := s.queue.removedUpTo(to)
		if done {
			break
		}
		s.lifeMu.Lock()
		idle := !s.stopping && !s.worker.Running()
		s.lifeMu.Unlock()
		if idle {
			return fmt.Errorf("otlpsink: sync: the sink is not started: %w", errNotSynced)
		}
		select {
		case <-removed:
		case <-ctx.Done():
			n, _ := s.queue.size()
			return fmt.Errorf("otlpsink: sync: %d spans queued, the receiver is not answering: %w (%w)", n, errNotSynced, ctx.Err())
		}
	}
	s.dropMu.Lock()
	dropped := s.dropEnd > floor
	s.syncFloor = max(s.syncFloor, to)
	s.dropMu.Unlock()
	if dropped {
		return fmt.Errorf("otlpsink: sync: spans were dropped (see kelemetry.otlp.spans.dropped): %w", errNotSynced)
	}
	return nil
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

// Stop stops accepting spans, sends what is queued (retrying while the receiver fails) and shuts
// the exporter down. If ctx ends first, the spans not yet sent are dropped and counted (reason
// stopped). No goroutine of the sink outlives it. Safe without Start; later calls do nothing.
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
		if err := s.flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flush: %w", err))
		}
	}
	if err := s.queueReg.Unregister(); err != nil {
		errs = append(errs, fmt.Errorf("unregister queue gauge: %w", err))
	}
	if err := s.exporter.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down exporter: %w", err))
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection: %w", err))
		}
	}
	if s.closeIdle != nil {
		s.closeIdle()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("otlpsink: stop: %w", err)
	}
	return nil
}

// run is the worker: it sends a batch when BatchSize spans are queued or FlushInterval after
// the first of them arrived. When stop ends it flushes and returns; its sends use ctx.
func (s *Sink) run(stop, ctx context.Context) {
	batch := make([]*aggregator.Span, 0, s.cfg.BatchSize)
	timer := time.NewTimer(s.cfg.FlushInterval)
	timer.Stop()
	defer timer.Stop()
	var due <-chan time.Time
	for {
		n, _ := s.queue.size()
		if n >= s.cfg.BatchSize || (n > 0 && due == nil && s.cfg.FlushInterval == 0) || (n > 0 && s.queue.flushing()) {
			timer.Stop()
			due = nil
			batch = s.sendHead(ctx, stop, batch)
			continue
		}
		if n > 0 && due == nil {
			timer.Reset(s.cfg.FlushInterval)
			due = timer.C
		}
		select {
		case <-s.queue.ready:
		case <-due:
			due = nil
			batch = s.sendHead(ctx, stop, batch)
		case <-stop.Done():
			_ = s.flush(ctx)
			return
		}
	}
}

// sendHead sends one batch from the head of the queue and removes it. It returns batch emptied,
// for reuse.
func (s *Sink) sendHead(ctx, stop context.Context, batch []*aggregator.Span) []*aggregator.Span {
	pos := s.queue.headPos()
	batch = s.queue.peek(batch[:0], s.cfg.BatchSize, s.cfg.MaxBatchBytes)
	if len(batch) > 0 {
		if !s.send(ctx, stop, batch) {
			s.dropMu.Lock()
			s.dropEnd = max(s.dropEnd, pos+uint64(len(batch)))
			s.dropMu.Unlock()
		}
		s.queue.remove(len(batch))
	}
	clear(batch)
	return batch[:0]
}

// flush sends everything queued, in batches. Nothing is enqueued any more.
func (s *Sink) flush(ctx context.Context) error {
	batch := make([]*aggregator.Span, 0, s.cfg.BatchSize)
	for {
		if n, _ := s.queue.size(); n == 0 {
			return ctx.Err()
		}
		batch = s.sendHead(ctx, nil, batch)
	}
}

// send exports one batch, retrying with backoff (up to MaxRetries when positive), and counts the
// outcome. It gives up when ctx ends (Stop's deadline). stop, when it ends, cuts a backoff short
// so that Stop's flush starts at once. It reports whether every span was delivered.
func (s *Sink) send(ctx, stop context.Context, batch []*aggregator.Span) bool {
	mctx := context.WithoutCancel(ctx)
	if ctx.Err() != nil {
		s.dropped.Add(mctx, int64(len(batch)), s.byStopped)
		return false
	}
	var spans []sdktrace.ReadOnlySpan
	var req []*tracepb.ResourceSpans
	var raw []byte
	switch {
	case s.uploadRaw != nil:
		raw = s.wenc.request(batch)
	case s.upload != nil:
		req = s.pconv.request(batch)
	default:
		spans = make([]sdktrace.ReadOnlySpan, len(batch))
		for i, sp := range batch {
			spans[i] = s.conv.span(sp)
		}
	}
	var stopped <-chan struct{}
	if stop != nil {
		stopped = stop.Done()
	}
	backoff := s.cfg.RetryBackoff
	attempts := 0
	var err error
	for {
		attempts++
		if err = s.exportOnce(ctx, spans, req, raw); err == nil {
			s.exported.Add(mctx, int64(len(batch)))
			if s.failing.Swap(false) {
				s.logger.Info("otlp export works again", "attempts", attempts)
			}
			return true
		}
		switch kind, n := classify(err); kind {
		case partial:
			n = min(max(n, 0), int64(len(batch)))
			s.exported.Add(mctx, int64(len(batch))-n)
			s.dropped.Add(mctx, n, s.byRejected)
			s.warnRejected("otlp receiver rejected some spans of a batch", "spans", len(batch), "rejected", n, "error", err)
			return n == 0
		case rejected:
			s.dropped.Add(mctx, int64(len(batch)), s.byRejected)
			s.warnRejected("otlp receiver refused a batch for good (not retried)", "spans", len(batch), "error", err)
			return false
		case tooLarge:
			if len(batch) == 1 {
				s.dropped.Add(mctx, 1, s.byRejected)
				s.warnRejected("otlp receiver refused a span as too large (not retried); raise its request size limit", "span", batch[0].Name, "error", err)
				return false
			}
			// Smaller requests may pass: send each half (the receiver took none of this one).
			half := len(batch) / 2
			first := s.send(ctx, stop, batch[:half])
			second := s.send(ctx, stop, batch[half:])
			return first && second
		}
		s.failures.Add(mctx, 1)
		s.failing.Store(true)
		if s.cfg.MaxRetries < 0 || (s.cfg.MaxRetries > 0 && attempts > s.cfg.MaxRetries) || ctx.Err() != nil {
			break
		}
		if now := time.Now(); now.Sub(s.lastFailLog) >= logEvery {
			s.lastFailLog = now
			s.logger.Warn("otlp export failed, retrying", "spans", len(batch), "attempts", attempts, "backoff", backoff, "error", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		case <-stopped:
			t.Stop()
			stopped = nil // retry at once, then keep backing off until Stop's deadline
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
	reason := s.byExportFail
	if ctx.Err() != nil {
		reason = s.byStopped
	}
	s.dropped.Add(mctx, int64(len(batch)), reason)
	s.logger.Warn("otlp export failed, dropping batch", "spans", len(batch), "attempts", attempts, "error", err)
	return false
}

// warnRejected logs a rejection, at most once every logEvery (worker only).
func (s *Sink) warnRejected(msg string, args ...any) {
	if now := time.Now(); now.Sub(s.lastRejectLog) >= logEvery {
		s.lastRejectLog = now
		s.logger.Warn(msg, args...)
	}
}

// exportOnce sends raw through uploadRaw or req through upload when set, else spans through the
// exporter.
func (s *Sink) exportOnce(ctx context.Context, spans []sdktrace.ReadOnlySpan, req []*tracepb.ResourceSpans, raw []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var err error
	switch {
	case s.uploadRaw != nil && len(raw) > 0:
		err = s.uploadRaw(ctx, raw)
	case s.upload != nil && len(req) > 0:
		err = s.upload(ctx, req)
	case s.uploadRaw != nil || s.upload != nil:
		return nil // nothing to send
	default:
		return s.exporter.ExportSpans(ctx, spans)
	}
	if err != nil {
		return fmt.Errorf("traces export: %w", err) // as the exporter wraps it
	}
	return nil
}
