package remotelinker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// worker serves one aggregator.Linker to remote clients: it subscribes to the linker's subject in
// a queue group, runs at most Concurrency jobs at once (a job over the bound is answered
// codeBusy at once, never queued), and answers every request with a wireResult. Start subscribes;
// Stop drains: it stops taking jobs, answers those received, and waits for them.
type worker struct {
	nc     *nats.Conn
	linker aggregator.Linker
	cfg    WorkerConfig
	logger *slog.Logger
	m      workerMetrics
	attrs  metric.MeasurementOption
	sem    chan struct{}

	mu      sync.Mutex // guards sub, closed and running.Add against Stop
	sub     *nats.Subscription
	closed  bool
	running sync.WaitGroup
	// ctx bounds the lookups: cancel ends them when Stop gives up waiting.
	ctx    context.Context // the lookups' lifetime, not a request's
	cancel context.CancelFunc
}

type workerMetrics struct {
	jobs  metric.Int64Counter
	links metric.Int64Counter
}

// Results of the kelemetry.remotelinker.worker.jobs counter: resultOK, or a wireResult code.
const resultPanic = "panic"

// newWorker builds a worker of l on nc (which the caller closes, after Stop).
func newWorker(nc *nats.Conn, l aggregator.Linker, cfg WorkerConfig, tel telemetry.Settings) (*worker, error) {
	if nc == nil || l == nil {
		return nil, errors.New("remotelinker: worker needs a NATS connection and a linker")
	}
	cfg = cfg.withDefaults(l.Name())
	if err := validSubject(cfg.Subject); err != nil {
		return nil, fmt.Errorf("remotelinker: worker: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{
		nc: nc, linker: l, cfg: cfg,
		logger: tel.Log().With("component", "remotelinker.worker", "linker", l.Name()),
		attrs:  metric.WithAttributes(attribute.String("linker", l.Name())),
		sem:    make(chan struct{}, cfg.Concurrency),
		ctx:    ctx, cancel: cancel,
	}
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/remotelinker")
	linker := attribute.String("linker", l.Name())
	var jobSets []attribute.Set
	for _, r := range []string{resultOK, codeBadRequest, codeUnsupportedVersion, codeBusy, codeLookup, codeTimeout, resultPanic, codeStopping} {
		jobSets = append(jobSets, attribute.NewSet(linker, attribute.String("result", r)))
	}
	w.m = workerMetrics{
		jobs: m.Counter("kelemetry.remotelinker.worker.jobs",
			"Link jobs a worker answered, by linker and result (ok, bad_request, unsupported_version, busy, lookup, timeout, panic, stopping).", "", jobSets...),
		links: m.Counter("kelemetry.remotelinker.worker.links", "Links a worker answered, by linker.", "", attribute.NewSet(linker)),
	}
	if err := m.Err(); err != nil {
		cancel()
		return nil, fmt.Errorf("remotelinker: %w", err)
	}
	return w, nil
}

// Config returns the effective configuration.
func (w *worker) Config() WorkerConfig { return w.cfg }

// Start subscribes to the subject. It does not block; a second call does nothing.
func (w *worker) Start(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != nil || w.closed {
		return nil
	}
	sub, err := w.nc.QueueSubscribe(w.cfg.Subject, w.cfg.Queue, w.onMsg)
	if err != nil {
		return fmt.Errorf("remotelinker: subscribe %s: %w", w.cfg.Subject, err)
	}
	w.sub = sub
	// The callback never blocks (it hands the job to a goroutine or answers busy), so pending
	// messages stay few; the limits only bound a burst.
	_ = sub.SetPendingLimits(64*w.cfg.Concurrency, 64<<20)
	return w.nc.Flush()
}

// onMsg runs in the subscription's goroutine: it starts the job or answers busy.
func (w *worker) onMsg(msg *nats.Msg) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.reply(msg, errResult(codeStopping, errors.New("worker stopping")), codeStopping)
		return
	}
	select {
	case w.sem <- struct{}{}:
	default:
		w.mu.Unlock()
		w.reply(msg, errResult(codeBusy, fmt.Errorf("worker runs %d jobs already", w.cfg.Concurrency)), codeBusy)
		return
	}
	w.running.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.running.Done()
		defer func() { <-w.sem }()
		res, result := w.handle(msg.Data)
		w.reply(msg, res, result)
	}()
}

// handle runs one job and returns its wireResult and the result to count.
func (w *worker) handle(data []byte) (res *wireResult, result string) {
	job, bad := decodeJob(data)
	if bad != nil {
		return bad, bad.Code
	}
	timeout := w.cfg.Timeout
	if job.TimeoutMillis > 0 {
		// A little less than the client waits, so that the answer arrives in time.
		timeout = min(timeout, time.Duration(job.TimeoutMillis)*time.Millisecond*9/10)
	}
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	defer func() {
		// A user's linker must not take the worker down with it.
		if p := recover(); p != nil {
			w.logger.Error("linker panicked", "object", job.Object.String(), "panic", p)
			res, result = &wireResult{Version: wireVersion, Code: codeLookup, Error: fmt.Sprintf("linker panicked: %v", p)}, resultPanic
		}
	}()
	links, err := w.linker.Lookup(ctx, aggregator.Object{ObjectRef: job.Object, Body: job.Body, MetaHash: job.MetaHash})
	if err != nil {
		if ctx.Err() != nil && w.ctx.Err() == nil {
			return errResult(codeTimeout, err), codeTimeout
		}
		return errResult(codeLookup, err), codeLookup
	}
	w.m.links.Add(ctx, int64(len(links)), w.attrs)
	return &wireResult{Version: wireVersion, Links: links}, resultOK
}

// reply counts result and answers msg with res when msg expects an answer.
func (w *worker) reply(msg *nats.Msg, res *wireResult, result string) {
	w.m.jobs.Add(context.Background(), 1, metric.WithAttributes(attribute.String("linker", w.linker.Name()), attribute.String("result", result)))
	if msg.Reply == "" {
		return
	}
	data, err := json.Marshal(res)
	if err != nil {
		data, _ = json.Marshal(errResult(codeLookup, fmt.Errorf("encode result: %w", err)))
	}
	if err := msg.Respond(data); err != nil {
		w.logger.Debug("answer link job", "error", err)
	}
}

// Stop drains the subscription: no new jobs, the received ones are answered, then it waits for
// the running lookups. If ctx ends first, the lookups are cancelled and Stop returns ctx's error
// once they returned. Safe without Start and more than once.
func (w *worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	sub := w.sub
	w.mu.Unlock()
	var err error
	if sub != nil && sub.IsValid() {
		if derr := sub.Drain(); derr != nil {
			_ = sub.Unsubscribe()
		}
		// The subscription closes once its pending messages went through onMsg.
		for sub.IsValid() && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
		if sub.IsValid() {
			_ = sub.Unsubscribe()
		}
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	if werr := loop.Wait(ctx, &w.running, "remote linker worker"); werr != nil {
		err = werr
		w.cancel()
		w.running.Wait()
	}
	w.cancel()
	if err != nil {
		return fmt.Errorf("remotelinker: %w", err)
	}
	return nil
}

// Serve runs a worker of l on nc until ctx ends, then drains it within drainTimeout: the whole
// main of a linker worker, after connecting (see natsqueue.Dial).
func Serve(ctx context.Context, nc *nats.Conn, l aggregator.Linker, cfg WorkerConfig, tel telemetry.Settings, drainTimeout time.Duration) error {
	w, err := newWorker(nc, l, cfg, tel)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		_ = w.Stop(context.Background())
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	return w.Stop(stopCtx)
}
