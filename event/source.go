package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/telemetry"
)

// client lists and watches the Events of one API in all namespaces. A client-go dynamic client's
// resource (dynamic.Interface.Resource(coreEvents or eventsV1Events)) satisfies it.
type client interface {
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// The two Event APIs.
var (
	coreEvents     = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	eventsV1Events = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// Defaults for sourceConfig.
const (
	defaultQueueSize          = 1000
	defaultSeenSize           = 4096
	defaultCheckpointInterval = 5 * time.Second
	defaultPageSize           = 500
	defaultMaxBackoff         = 30 * time.Second
)

// sourceConfig configures a Source. The zero value means defaults (core/v1 Events, no
// checkpoint).
type sourceConfig struct {
	// API is "v1" (core/v1 Events, the default) or "events.k8s.io/v1".
	API string `yaml:"api"`
	// QueueSize bounds the Events received and not yet sent (default 1000). When it is full the
	// watch waits (the API server buffers), nothing is dropped.
	QueueSize int `yaml:"queueSize"`
	// SeenSize bounds the set of Events already sent, kept in the checkpoint (default 4096).
	SeenSize int `yaml:"seenSize"`
	// CheckpointFile, when set, stores the checkpoint in this local file.
	CheckpointFile string `yaml:"checkpointFile"`
	// CheckpointConfigMap, when set ("namespace/name"), stores the checkpoint in this ConfigMap
	// (used when CheckpointFile is empty).
	CheckpointConfigMap string `yaml:"checkpointConfigMap"`
	// CheckpointInterval is how often a changed checkpoint is saved (default 5s); it is saved
	// on Stop too.
	CheckpointInterval time.Duration `yaml:"checkpointInterval"`
	// PageSize is the page size of lists (default 500).
	PageSize int64 `yaml:"pageSize"`
	// MaxBackoff caps the wait between failed list or watch attempts (default 30s).
	MaxBackoff time.Duration `yaml:"maxBackoff"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c sourceConfig) withDefaults() sourceConfig {
	if c.API == "" {
		c.API = "v1"
	}
	if c.QueueSize == 0 {
		c.QueueSize = defaultQueueSize
	}
	if c.SeenSize == 0 {
		c.SeenSize = defaultSeenSize
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = defaultCheckpointInterval
	}
	if c.PageSize == 0 {
		c.PageSize = defaultPageSize
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = defaultMaxBackoff
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c sourceConfig) Validate() error {
	c = c.withDefaults()
	if c.API != "v1" && c.API != "events.k8s.io/v1" {
		return fmt.Errorf("event source: api %q is not v1 or events.k8s.io/v1", c.API)
	}
	if c.QueueSize < 0 || c.SeenSize < 0 || c.CheckpointInterval < 0 || c.PageSize < 0 || c.MaxBackoff < 0 {
		return errors.New("event source: sizes and intervals must not be negative")
	}
	if c.CheckpointConfigMap != "" {
		if _, _, err := splitNamespaceName(c.CheckpointConfigMap); err != nil {
			return err
		}
	}
	return nil
}

// gvr is the resource of the configured API.
func (c sourceConfig) gvr() schema.GroupVersionResource {
	if c.withDefaults().API == "events.k8s.io/v1" {
		return eventsV1Events
	}
	return coreEvents
}

func splitNamespaceName(s string) (string, string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if i == 0 || i == len(s)-1 {
				break
			}
			return s[:i], s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("event source: checkpoint configmap %q is not namespace/name", s)
}

// source sends the Events of a cluster to the aggregator as they are created and updated: a
// list, then a watch from the list's resourceVersion, relisting when the watch expires. Events go
// through a bounded queue to one worker, which skips Events already sent (same UID, no new
// occurrence) and records progress in the checkpoint: the resourceVersion only advances past
// Events that were sent. After a restart it watches from the checkpoint, so nothing is lost; what
// the API server sends again is skipped, or, beyond the seen set, sent again under the same span
// ID, which is harmless.
type source struct {
	cfg    sourceConfig
	client client
	conv   *Converter
	agg    aggregator.Aggregator
	store  checkpointStore
	logger *slog.Logger

	mu    sync.Mutex
	rv    string
	seen  *lru.Cache[string, seenEvent]
	dirty bool

	queue   chan item
	runMu   sync.Mutex // serialises Start (the checkpoint load) and Stop
	stopped bool       // Stop was called: Start does nothing
	loops   loop.Group // the watch, the worker and the checkpoint flush

	events      metric.Int64Counter
	sendRetries metric.Int64Counter
	results     map[string]metric.MeasurementOption
	drops       *timeDrops
}

// item is a queued Event, or a position marker (rec nil) that lets the checkpoint advance.
type item struct {
	rec *record
	rv  string
}

// meterScope is the instrumentation scope of the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/event"

// Source results, the result attribute of kelemetry.event.source.events.
const (
	resultSent      = "sent"
	resultDuplicate = "duplicate"
	resultSkipped   = "skipped"
	resultFailed    = "send_error"
)

// newSource builds a Source. store may be nil (no checkpoint); ts gives the logger and meter
// provider (unset: slog.Default(), no metrics).
func newSource(cfg sourceConfig, client client, conv *Converter, agg aggregator.Aggregator, store checkpointStore,
	ts telemetry.Settings) (*source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil || conv == nil || agg == nil {
		return nil, errors.New("event source: nil client, converter or aggregator")
	}
	cfg = cfg.withDefaults()
	seen, err := lru.New[string, seenEvent](cfg.SeenSize)
	if err != nil {
		return nil, fmt.Errorf("event source: %w", err)
	}
	s := &source{cfg: cfg, client: client, conv: conv, agg: agg, store: store,
		logger: ts.Log().With("component", "event.source"), seen: seen,
		queue: make(chan item, cfg.QueueSize), results: map[string]metric.MeasurementOption{}}
	meter := instrument.NewMeter(ts, meterScope)
	results := []string{resultSent, resultDuplicate, resultSkipped, resultFailed,
		timecheck.TimeReasonUnrepresentable, timecheck.TimeReasonFuture}
	resultSets := instrument.Sets("result", results...)
	for i, r := range results {
		s.results[r] = metric.WithAttributeSet(resultSets[i])
	}
	s.events = meter.Counter("kelemetry.event.source.events",
		"Kubernetes Events received by the event source, by result (sent, duplicate, skipped, send_error, unrepresentable_time, future_time).", "{event}",
		resultSets...)
	s.sendRetries = meter.Counter("kelemetry.event.source.send.retries",
		"Sends of Kubernetes Events retried while the sinks were unavailable (a full disk, a full OTLP queue).", "{attempt}", *attribute.EmptySet())
	s.drops = newTimeDrops(meter, s.logger)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("event source: %w", err)
	}
	return s, nil
}

// Start loads the checkpoint and starts listing and watching in the background. It does not
// block; it does nothing when the Source runs already or was stopped.
func (s *source) Start(ctx context.Context) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.stopped || s.loops.Running() {
		return nil
	}
	if s.store != nil {
		cp, err := s.store.Load(ctx)
		if err != nil {
			return err
		}
		if cp != nil {
			s.restore(cp)
		}
	}
	fns := []func(context.Context){
		func(ctx context.Context) {
			s.watchLoop(ctx)
			close(s.queue) // the worker drains what is queued, then exits
		},
		s.work,
	}
	if s.store != nil {
		fns = append(fns, s.flushLoop)
	}
	s.loops.Start(fns...)
	return nil
}

// Stop stops the watch, lets the worker send what is queued, waits for every goroutine of the
// Source (a periodic checkpoint save in progress included), and then saves the final checkpoint
// with ctx. If ctx ends first, Stop returns its error without the final save, which could race
// the goroutines still running: the checkpoint stays at the last periodic save, so what came
// after it is seen again after a restart (skipped or sent again under the same span IDs). Safe
// without Start and more than once.
func (s *source) Stop(ctx context.Context) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	s.stopped = true
	running := s.loops.Running()
	if err := s.loops.Stop(ctx, "event source"); err != nil {
		return err
	}
	if running && s.store != nil {
		// The ctx of Stop, not a cancelled one: the final save must happen.
		return s.save(ctx, true)
	}
	return nil
}

// checkpoint returns the current checkpoint.
func (s *source) checkpoint() *checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := &checkpoint{ResourceVersion: s.rv, Saved: time.Now().UTC()}
	for _, uid := range s.seen.Keys() { // oldest first, so a restore keeps the LRU order
		if v, ok := s.seen.Peek(uid); ok {
			cp.Seen = append(cp.Seen, v)
		}
	}
	return cp
}

func (s *source) restore(cp *checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = cp.ResourceVersion
	for _, e := range cp.Seen {
		s.seen.Add(e.UID, e)
	}
}

func (s *source) save(ctx context.Context, force bool) error {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = false
	s.mu.Unlock()
	if !dirty && !force {
		return nil
	}
	if err := s.store.Save(ctx, s.checkpoint()); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *source) flushLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := s.save(sctx, false); err != nil {
				s.logger.Warn("save event checkpoint", "error", err)
			}
			cancel()
		}
	}
}

// work sends queued Events in order and advances the checkpoint. After an Event could not be
// sent, the checkpoint's resourceVersion stops advancing for the rest of the run, so a restart
// watches again from before that Event (at least once; the seen set and idempotent span IDs make
// the repeats harmless).
func (s *source) work(ctx context.Context) {
	stuck := false
	for it := range s.queue {
		if it.rec != nil && !s.handle(ctx, it.rec) {
			if !stuck {
				s.logger.Warn("an Event could not be sent; the checkpoint stays before it until restart",
					"event", it.rec.Namespace+"/"+it.rec.Name)
			}
			stuck = true
		}
		if it.rv != "" && !stuck {
			s.mu.Lock()
			if s.rv != it.rv {
				s.rv, s.dirty = it.rv, true
			}
			s.mu.Unlock()
		}
	}
}

// sendAttempts and sendBackoff bound the retries of a failed send.
const sendAttempts = 3

var sendBackoff = backoff.Policy{Base: 200 * time.Millisecond}

// outageBackoff paces the sends that wait out a sink outage.
var outageBackoff = backoff.Policy{Base: 100 * time.Millisecond, Max: 2 * time.Second}

// handle sends one Event unless it was sent already. It reports false when the Event should have
// been sent and could not be, after retries.
func (s *source) handle(ctx context.Context, rec *record) bool {
	// The worker drains the queue after the watch stopped: sending must not use the run ctx. The
	// run ctx still bounds waiting out a sink outage (see below), which ends when Stop begins.
	run := ctx
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	prev, seen := s.seen.Get(rec.UID)
	s.mu.Unlock()
	if seen && rec.Count <= prev.Count && !rec.Last.After(prev.Last) {
		s.events.Add(ctx, 1, s.results[resultDuplicate])
		return true
	}
	var start time.Time
	win := s.conv.Window()
	if seen && aggregator.WindowStart(prev.Start, win).Equal(aggregator.WindowStart(rec.Last, win)) {
		start = prev.Start // keep the first occurrence seen in this window
	}
	ev, err := s.conv.Convert(ctx, rec, start)
	if err != nil {
		if reason := s.drops.drop(ctx, err); reason != "" {
			s.events.Add(ctx, 1, s.results[reason])
			return true
		}
		s.events.Add(ctx, 1, s.results[resultSkipped])
		s.logger.Debug("skip event", "event", rec.Namespace+"/"+rec.Name, "error", err)
		return true
	}
	for attempt, outage := 1, 0; ; attempt++ {
		err := s.agg.Send(ctx, ev)
		if err == nil {
			break
		}
		if errors.Is(err, aggregator.ErrSinkUnavailable) && run.Err() == nil {
			// A full disk or a full OTLP queue: wait it out rather than lose the Event (the
			// webhook's batches wait the same way, in kube-apiserver). Stop ends the wait.
			attempt--
			s.sendRetries.Add(ctx, 1)
			outageBackoff.Sleep(run, outage)
			outage++
			continue
		}
		if errors.Is(err, aggregator.ErrInvalidEvent) || attempt >= sendAttempts {
			s.events.Add(ctx, 1, s.results[resultFailed])
			s.logger.Debug("send event", "event", rec.Namespace+"/"+rec.Name, "attempts", attempt, "error", err)
			return errors.Is(err, aggregator.ErrInvalidEvent) // retrying or rewatching cannot fix an invalid one
		}
		sendBackoff.Sleep(ctx, attempt-1) // ctx is not cancelled by Stop: the drain retries too
	}
	s.mu.Lock()
	s.seen.Add(rec.UID, seenEvent{UID: rec.UID, Count: rec.Count, Last: rec.Last, Start: ev.Start})
	s.dirty = true
	s.mu.Unlock()
	s.events.Add(ctx, 1, s.results[resultSent])
	return true
}

// enqueue waits for room in the queue; false when ctx ended.
func (s *source) enqueue(ctx context.Context, it item) bool {
	select {
	case s.queue <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// watchLoop lists when it has no position, then watches, until ctx ends.
func (s *source) watchLoop(ctx context.Context) {
	s.mu.Lock()
	rv := s.rv
	s.mu.Unlock()
	retry := backoff.Policy{Base: retryBase, Max: s.cfg.MaxBackoff}
	failures := 0 // consecutive failed lists or watches
	for ctx.Err() == nil {
		if failures > 0 && !retry.Sleep(ctx, failures-1) {
			return
		}
		if rv == "" {
			listRV, err := s.list(ctx)
			if err != nil {
				failures++
				s.logger.Warn("list events", "error", err, "retry_in", retry.Delay(failures-1))
				continue
			}
			rv = listRV
		}
		next, err := s.watch(ctx, rv)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errExpired):
			s.logger.Info("event watch expired, listing again", "resourceVersion", rv)
			rv, failures = "", 0
		case err != nil:
			failures++
			s.logger.Warn("watch events", "error", err, "retry_in", retry.Delay(failures-1))
			rv = next
		default:
			rv, failures = next, 0
		}
	}
}

// retryBase is the first wait after a failed list or watch; it doubles up to MaxBackoff.
const retryBase = 500 * time.Millisecond

var errExpired = errors.New("resourceVersion expired")

// list queues every current Event and then a marker with the list's resourceVersion.
func (s *source) list(ctx context.Context) (string, error) {
	opts := metav1.ListOptions{Limit: s.cfg.PageSize}
	for {
		l, err := s.client.List(ctx, opts)
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				opts.Continue = "" // the continue token expired: start over
				continue
			}
			return "", fmt.Errorf("list events: %w", err)
		}
		for i := range l.Items {
			rec, err := s.decode(&l.Items[i])
			if err != nil {
				s.events.Add(ctx, 1, s.results[resultSkipped])
				continue
			}
			if !s.enqueue(ctx, item{rec: rec}) {
				return "", ctx.Err()
			}
		}
		if l.GetContinue() == "" {
			rv := l.GetResourceVersion()
			if !s.enqueue(ctx, item{rv: rv}) {
				return "", ctx.Err()
			}
			return rv, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// watch queues the Events of one watch from rv and returns the last resourceVersion seen, with
// errExpired when rv is too old.
func (s *source) watch(ctx context.Context, rv string) (string, error) {
	w, err := s.client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return rv, errExpired
		}
		return rv, err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil // closed by the server: watch again from rv
			}
			switch ev.Type {
			case watch.Error:
				status := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
					return rv, errExpired
				}
				return rv, fmt.Errorf("watch events: %w", status)
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				if next := u.GetResourceVersion(); next != "" {
					rv = next
				}
				it := item{rv: rv}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					rec, err := s.decode(u)
					if err != nil {
						s.events.Add(ctx, 1, s.results[resultSkipped])
					} else {
						it.rec = rec
					}
				}
				if !s.enqueue(ctx, it) {
					return rv, ctx.Err()
				}
			}
		}
	}
}

// decode reads an Event of the configured API.
func (s *source) decode(u *unstructured.Unstructured) (*record, error) {
	if s.cfg.API == "events.k8s.io/v1" {
		var e eventsv1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
			return nil, fmt.Errorf("decode event: %w", err)
		}
		return fromEventsV1(&e), nil
	}
	var e corev1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	return fromCore(&e), nil
}
