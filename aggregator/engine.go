package aggregator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/clockcache"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Engine is the Aggregator implementation.
type Engine struct {
	cfg        Config
	window     time.Duration
	logger     *slog.Logger
	sinks      []Sink
	linkers    []Linker
	decorators []Decorator

	// objects remembers, per (object, window), that the object span was emitted and whether
	// the object's links were looked up with its body. It is keyed by the object's trace ID in
	// the window, which names the pair as exactly as the traces do (TraceIDFor): 16 bytes, where
	// the object's key and window took about 100 and kept the event's strings alive (about 500
	// bytes an entry in all, some 50 MB at the default SpanCacheSize, against 15 MB).
	objects *clockcache.Cache[trace.TraceID, objectState]
	objMu   sync.Mutex // serialises the check-and-set on objects

	jobsMu sync.RWMutex // guards closed and the send on the lanes' queues against close
	// lanes are the sets of link workers: one shared by the linkers that are not isolated, and
	// one per IsolatedLinker, so that a slow linker holds only its own workers and queue.
	lanes    []*lane
	stopping bool // no new jobs from Send; transitive jobs still run
	closed   bool // jobs is closed
	started  bool
	pending  sync.WaitGroup // queued or running jobs
	inflight atomic.Int64   // the same count as pending, readable (LinkJobs)
	// workers are the link workers; their context, cancelled when Stop gives up waiting, bounds
	// the lookups.
	workers loop.Group

	m                engineMetrics
	queueReg, capReg metric.Registration
}

type objectState struct {
	// linkedWithBody is set once a link job ran (or was queued) with the object's body.
	linkedWithBody bool
	// metaHash is the Object.MetaHash of the body that job had.
	metaHash uint64
}

// lane is a set of link workers with their queues and the linkers they run. Its jobs has one
// queue per link worker; an object's jobs always go to the same worker (by a hash of its key),
// so they run one at a time and in the order its events came in: which jobs run, and which of
// them writes a link span last, does not depend on timing (within the lane).
type lane struct {
	linkers []Linker
	jobs    []chan linkJob
}

type linkJob struct {
	obj    Object
	window time.Time
	at     time.Time
	depth  int
}

type engineMetrics struct {
	events       *instrument.FixedCounter // by eventResultSets
	spans        *instrument.FixedCounter // by spanKindSets
	exportErrors metric.Int64Counter
	linkJobs     metric.Int64Counter
	linkErrors   metric.Int64Counter
	links        metric.Int64Counter
	linkRetries  metric.Int64Counter
	evictions    metric.Int64Counter
}

// Deps are the collaborators of an Engine.
type Deps struct {
	// Window is the trace window length (zero: DefaultWindow).
	Window     Window
	Telemetry  telemetry.Settings
	Sinks      []Sink
	Linkers    []Linker
	Decorators []Decorator
}

// New builds an Engine. Call Start before Send for linking to run; Send works without Start, but
// link jobs then wait in the queue.
func New(cfg Config, deps Deps) (*Engine, error) {
	if err := errors.Join(cfg.Validate(), deps.Window.Validate()); err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	cfg = cfg.WithDefaults()
	logger := deps.Telemetry.Log()

	decorators := slices.Clone(deps.Decorators)
	slices.SortStableFunc(decorators, func(a, b Decorator) int { return cmp.Compare(a.Name(), b.Name()) })
	linkers := slices.Clone(deps.Linkers)
	slices.SortStableFunc(linkers, func(a, b Linker) int { return cmp.Compare(a.Name(), b.Name()) })

	e := &Engine{
		cfg:        cfg,
		window:     deps.Window.Length(),
		logger:     logger.With("component", "aggregator"),
		sinks:      slices.Clone(deps.Sinks),
		linkers:    linkers,
		decorators: decorators,
	}
	var shared []Linker
	for _, l := range linkers {
		if il, ok := l.(IsolatedLinker); ok {
			e.lanes = append(e.lanes, newLane([]Linker{l}, il.LinkWorkers(), cfg.LinkQueueSize))
		} else {
			shared = append(shared, l)
		}
	}
	if len(shared) > 0 || len(e.lanes) == 0 {
		e.lanes = append([]*lane{newLane(shared, cfg.LinkWorkers, cfg.LinkQueueSize)}, e.lanes...)
	}
	if err := e.initMetrics(deps.Telemetry); err != nil {
		return nil, err
	}
	objects, err := clockcache.New(cfg.SpanCacheSize, func(trace.TraceID, objectState) {
		e.m.evictions.Add(context.Background(), 1)
	})
	if err != nil {
		return nil, fmt.Errorf("aggregator: span cache: %w", err)
	}
	e.objects = objects
	return e, nil
}

// newLane builds a lane of workers goroutines (at least 1) sharing out queueSize jobs.
func newLane(linkers []Linker, workers, queueSize int) *lane {
	workers = max(1, workers)
	per := max(1, (queueSize+workers-1)/workers)
	l := &lane{linkers: linkers, jobs: make([]chan linkJob, workers)}
	for i := range l.jobs {
		l.jobs[i] = make(chan linkJob, per)
	}
	return l
}

func (e *Engine) initMetrics(tel telemetry.Settings) error {
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/aggregator")
	// The linkers the engine was built with, at 0 from the start.
	linkerSets := make([]attribute.Set, len(e.linkers))
	for i, l := range e.linkers {
		linkerSets[i] = attribute.NewSet(attribute.String("linker", l.Name()))
	}
	e.m = engineMetrics{
		events: m.FixedCounter("kelemetry.aggregator.events", "Events received, by result.", "",
			eventResultSets[eventInvalid], eventResultSets[eventExportError], eventResultSets[eventOK]),
		spans: m.FixedCounter("kelemetry.aggregator.spans", "Spans handed to sinks, by kind.", "",
			spanKindSets[spanObject], spanKindSets[spanLink], spanKindSets[spanEvent], spanKindSets[spanRequest]),
		exportErrors: m.Counter("kelemetry.aggregator.export.errors", "Sink exports that failed.", "", *attribute.EmptySet()),
		linkJobs: m.Counter("kelemetry.aggregator.link.jobs", "Link jobs, by result (queued, dropped, done, depth_limit).", "",
			attribute.NewSet(attribute.String("result", "queued")), attribute.NewSet(attribute.String("result", "dropped")),
			attribute.NewSet(attribute.String("result", "done")), attribute.NewSet(attribute.String("result", "depth_limit"))),
		linkErrors:  m.Counter("kelemetry.aggregator.link.errors", "Linker lookups that failed, by linker.", "", linkerSets...),
		links:       m.Counter("kelemetry.aggregator.links", "Links found, by linker.", "", linkerSets...),
		linkRetries: m.Counter("kelemetry.aggregator.link.export.retries", "Exports of link spans retried while the sinks were unavailable.", "", *attribute.EmptySet()),
		evictions:   m.Counter("kelemetry.aggregator.spancache.evictions", "Objects evicted from the emission cache.", "", *attribute.EmptySet()),
	}
	e.queueReg = m.Gauge("kelemetry.aggregator.link.queue.depth", "Link jobs waiting.", "",
		func() (int64, bool) { return int64(e.queued()), true })
	e.capReg = m.Gauge("kelemetry.aggregator.link.queue.capacity", "Link jobs the queues hold at most (linkQueueSize, rounded up per worker); a job whose worker's queue is full is dropped.", "",
		func() (int64, bool) { return int64(e.capacity()), true })
	if err := m.Err(); err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	return nil
}

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// Start launches the link workers. It does not block.
func (e *Engine) Start(context.Context) error {
	e.jobsMu.Lock()
	defer e.jobsMu.Unlock()
	if e.started || e.closed {
		return nil
	}
	e.started = true
	var workers []func(context.Context)
	for _, ln := range e.lanes {
		for _, jobs := range ln.jobs {
			workers = append(workers, func(ctx context.Context) { e.worker(ctx, ln.linkers, jobs) })
		}
	}
	e.workers.Start(workers...)
	return nil
}

// Stop stops taking link jobs from Send, lets the workers finish the queued ones (and the jobs
// they spawn for linked objects), and waits for them. If ctx ends first, running lookups are
// cancelled, the rest of the queue is dropped, and Stop returns ctx's error after the workers
// exit. Safe to call without Start and more than once.
func (e *Engine) Stop(ctx context.Context) error {
	e.jobsMu.Lock()
	e.stopping = true
	started := e.started
	e.jobsMu.Unlock()

	var err error
	if started {
		if err = loop.Wait(ctx, &e.pending, "aggregator"); err != nil {
			// Cancel the running lookups (ctx has ended: this does not wait); the workers skip
			// the rest of the queue.
			_ = e.workers.Stop(ctx, "aggregator")
		}
	}
	e.jobsMu.Lock()
	if !e.closed {
		e.closed = true
		for _, ln := range e.lanes {
			for _, jobs := range ln.jobs {
				close(jobs)
			}
		}
	}
	e.jobsMu.Unlock()
	// The workers return once the queue is closed and empty: wait for them in any case.
	_ = e.workers.Stop(context.Background(), "aggregator")
	if !started {
		// Nobody will run what is queued: account for it.
		for _, ln := range e.lanes {
			for _, jobs := range ln.jobs {
				for range jobs {
					e.donePending()
				}
			}
		}
	}
	// The provider no longer reads the queue depth (nor holds the engine); Send still works.
	if uerr := errors.Join(e.queueReg.Unregister(), e.capReg.Unregister()); uerr != nil {
		err = errors.Join(err, fmt.Errorf("aggregator: unregister metric: %w", uerr))
	}
	return err
}

// Send places ev in its object's trace and exports the resulting spans.
func (e *Engine) Send(ctx context.Context, ev *Event) error {
	if err := validateEvent(ev); err != nil {
		e.m.events.Add(eventInvalid, 1)
		return err
	}
	start, end := ev.Start.UTC(), ev.End.UTC()
	if end.Before(start) {
		end = start
	}
	window := WindowStart(start, e.window)
	key := ev.Object.Key()
	tid := TraceIDFor(key, window)
	objSID := ObjectSpanID(tid)

	spans := make([]*Span, 0, 2)
	newObject, wantLinks := e.markObject(tid, ev.Object.Body != nil, ev.Object.MetaHash)
	if newObject {
		spans = append(spans, e.objectSpan(ev.Object.ObjectRef, window, tid, objSID))
	}
	spans = append(spans, &Span{
		TraceID:    tid,
		SpanID:     EventSpanID(tid, ev.Source, ev.ID),
		ParentID:   objSID,
		Kind:       KindEvent,
		Source:     ev.Source,
		Name:       ev.Title,
		Object:     ev.Object.ObjectRef,
		Window:     window,
		Start:      start,
		End:        end,
		Attributes: ev.Attributes,
		Logs:       ev.Logs,
		Error:      ev.Error,
	})
	err := e.export(ctx, spans)
	if err != nil && newObject {
		// The object span may not have been written: let the retry of this event write it.
		e.forgetObject(tid)
	}
	for _, link := range ev.Links {
		if lerr := e.emitLink(ctx, linkJob{obj: ev.Object, window: window, at: start}, link); lerr != nil {
			err = errors.Join(err, fmt.Errorf("aggregator: event link: %w", lerr))
		}
	}
	if wantLinks {
		e.enqueueLink(ctx, linkJob{obj: ev.Object, window: window, at: start, depth: 0})
	}
	if err != nil {
		e.m.events.Add(eventExportError, 1)
		return err
	}
	e.m.events.Add(eventOK, 1)
	return nil
}

// ExportSpans hands spans made outside Send to the decorators and sinks: request spans under an
// event span that a source joined to it later (KindRequest, see RequestSpanID). The spans must
// belong to traces Send places events in; the engine does not check them further.
func (e *Engine) ExportSpans(ctx context.Context, spans []*Span) error {
	if len(spans) == 0 {
		return nil
	}
	return e.export(ctx, spans)
}

// SinkHealth joins the errors of the sinks that implement HealthChecker: nil when every sink
// takes writes.
func (e *Engine) SinkHealth(ctx context.Context) error {
	var errs []error
	for _, s := range e.sinks {
		if h, ok := s.(HealthChecker); ok {
			if err := h.Health(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("aggregator: sink unhealthy: %w", err)
	}
	return nil
}

// SyncSinks calls Sync on the sinks that implement Syncer: once it returns nil, every span
// exported before the call survives a crash of the process (as far as those sinks go).
func (e *Engine) SyncSinks(ctx context.Context) error {
	var errs []error
	for _, s := range e.sinks {
		if y, ok := s.(Syncer); ok {
			if err := y.Sync(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("aggregator: sync sinks: %w", err)
	}
	return nil
}

// HasEvents reports, for each of evs, whether its event span is already stored by every sink
// that implements SpanChecker, as Send would place it; with no such sink it reports false for
// all (the sinks upsert: sending an event again is harmless). A queue redelivering events
// after a crash acknowledges those found without sending them again, so that a store that does
// not upsert (Jaeger) holds each span once. A nil entry of evs gives false.
func (e *Engine) HasEvents(ctx context.Context, evs []*Event) ([]bool, error) {
	out := make([]bool, len(evs))
	var checkers []SpanChecker
	for _, s := range e.sinks {
		if c, ok := s.(SpanChecker); ok {
			checkers = append(checkers, c)
		}
	}
	if len(checkers) == 0 || len(evs) == 0 {
		return out, nil
	}
	refs := make([]SpanRef, 0, len(evs))
	idx := make([]int, 0, len(evs))
	for i, ev := range evs {
		if ev == nil || validateEvent(ev) != nil {
			continue
		}
		window := WindowStart(ev.Start.UTC(), e.window)
		tid := TraceIDFor(ev.Object.Key(), window)
		refs = append(refs, SpanRef{TraceID: tid, SpanID: EventSpanID(tid, ev.Source, ev.ID), Window: window})
		idx = append(idx, i)
	}
	if len(refs) == 0 {
		return out, nil
	}
	for _, i := range idx {
		out[i] = true
	}
	for _, c := range checkers {
		has, err := c.HasSpans(ctx, refs)
		if err != nil {
			return make([]bool, len(evs)), fmt.Errorf("aggregator: check stored spans: %w", err)
		}
		if len(has) != len(refs) {
			return make([]bool, len(evs)), fmt.Errorf("aggregator: check stored spans: %d answers for %d spans", len(has), len(refs))
		}
		for j, i := range idx {
			out[i] = out[i] && has[j]
		}
	}
	return out, nil
}

func validateEvent(ev *Event) error {
	switch {
	case ev == nil:
		return fmt.Errorf("%w: nil event", ErrInvalidEvent)
	case ev.Object.Resource == "" || ev.Object.Name == "":
		return fmt.Errorf("%w: object needs a resource and a name, got %q", ErrInvalidEvent, ev.Object.String())
	case ev.Start.IsZero():
		return fmt.Errorf("%w: %s: no start time", ErrInvalidEvent, ev.Object.String())
	case ev.Source == "" || ev.ID == "":
		return fmt.Errorf("%w: %s: source and ID are required", ErrInvalidEvent, ev.Object.String())
	}
	return nil
}

// markObject records that the object of trace tid has an event in the trace's window. newObject
// says the object span must be emitted; wantLinks says a link job should run: first sight, first
// sight of a body after a job that had none, or a body whose metaHash differs from the last
// linked one.
func (e *Engine) markObject(wk trace.TraceID, hasBody bool, metaHash uint64) (newObject, wantLinks bool) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	st, ok := e.objects.Get(wk)
	if !ok {
		e.objects.Add(wk, objectState{linkedWithBody: hasBody, metaHash: metaHash})
		return true, len(e.linkers) > 0
	}
	if hasBody && (!st.linkedWithBody || (metaHash != 0 && metaHash != st.metaHash)) {
		st.linkedWithBody, st.metaHash = true, metaHash
		e.objects.Add(wk, st)
		return false, len(e.linkers) > 0
	}
	return false, false
}

// forgetObject undoes markObject after a failed export, so that the next event of the object
// in the window of trace tid emits the object span (and looks up links) again.
func (e *Engine) forgetObject(tid trace.TraceID) {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	e.objects.Remove(tid)
}

// forget undoes the link part of markObject so that a later event retries a dropped job.
func (e *Engine) forgetLinks(key ObjectKey, window time.Time) {
	wk := TraceIDFor(key, window)
	e.objMu.Lock()
	defer e.objMu.Unlock()
	if st, ok := e.objects.Peek(wk); ok && st.linkedWithBody {
		st.linkedWithBody, st.metaHash = false, 0
		e.objects.Add(wk, st)
	}
}

func (e *Engine) objectSpan(ref ObjectRef, window time.Time, tid trace.TraceID, sid trace.SpanID) *Span {
	return &Span{
		TraceID: tid,
		SpanID:  sid,
		Kind:    KindObject,
		Source:  string(KindObject),
		Name:    ref.Resource + "/" + ref.Name,
		Object:  ref,
		Window:  window,
		Start:   window,
		End:     window.Add(e.window),
	}
}

func (e *Engine) export(ctx context.Context, spans []*Span) error {
	for _, d := range e.decorators {
		for _, sp := range spans {
			d.Decorate(ctx, sp)
		}
	}
	var errs []error
	for _, s := range e.sinks {
		if err := s.Export(ctx, spans); err != nil {
			e.m.exportErrors.Add(ctx, 1)
			errs = append(errs, err)
		}
	}
	countSpans(e.m.spans, spans)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("aggregator: export: %w", err)
	}
	return nil
}

// linkRetry paces the retries of link spans a sink refused as unavailable.
var linkRetry = backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second}

// exportRetry exports spans, retrying while the sinks are unavailable (a full disk, a full OTLP
// queue: errors wrapping ErrSinkUnavailable) until ctx ends, i.e. until the engine stops; other
// errors are returned at once. A link worker waits here out an outage: no link is lost to it,
// and the link queue bounds (and counts) what waits behind.
func (e *Engine) exportRetry(ctx context.Context, spans []*Span) error {
	for attempt := 0; ; attempt++ {
		err := e.export(ctx, spans)
		if err == nil || !errors.Is(err, ErrSinkUnavailable) {
			return err
		}
		e.m.linkRetries.Add(ctx, 1)
		if !linkRetry.Sleep(ctx, attempt) {
			return err
		}
	}
}

func (e *Engine) enqueueLink(ctx context.Context, job linkJob) {
	e.jobsMu.RLock()
	defer e.jobsMu.RUnlock()
	if e.closed || (e.stopping && job.depth == 0) {
		e.m.linkJobs.Add(ctx, 1, resultDropped...)
		return
	}
	for _, ln := range e.lanes {
		e.addPending()
		select {
		case ln.jobs[jobQueue(job.obj.Key(), len(ln.jobs))] <- job:
			e.m.linkJobs.Add(ctx, 1, resultQueued...)
		default:
			e.donePending()
			e.m.linkJobs.Add(ctx, 1, resultDropped...)
			// The object's next event retries its links (every lane's: their spans are idempotent).
			e.forgetLinks(job.obj.Key(), job.window)
			e.logger.Debug("link queue full, job dropped", "object", job.obj.String())
		}
	}
}

func (e *Engine) addPending() {
	e.inflight.Add(1)
	e.pending.Add(1)
}

func (e *Engine) donePending() {
	e.inflight.Add(-1)
	e.pending.Done()
}

// LinkJobs is the number of link jobs queued or running, the jobs they spawn for linked objects
// included. With an empty audit queue, 0 means every accepted event's spans and links are in
// the sinks: the tracer has caught up (GET /healthz reports it as linkJobs).
func (e *Engine) LinkJobs() int { return int(e.inflight.Load()) }

// queued is the number of link jobs waiting in the workers' queues.
func (e *Engine) queued() int { n, _ := e.linkQueues(); return n }

// capacity is the number of link jobs the workers' queues hold at most.
func (e *Engine) capacity() int { _, c := e.linkQueues(); return c }

// linkQueues sums the workers' queues: the jobs waiting, and how many they hold at most.
func (e *Engine) linkQueues() (queued, capacity int) {
	for _, ln := range e.lanes {
		for _, jobs := range ln.jobs {
			queued += len(jobs)
			capacity += cap(jobs)
		}
	}
	return queued, capacity
}

// jobQueue picks the worker queue of an object's link jobs: FNV-1a over its key (a window's jobs
// and the next window's go to the same worker, which costs nothing).
func jobQueue(k ObjectKey, n int) int {
	h := uint64(14695981039346656037)
	for _, s := range [...]string{k.Cluster, k.Group, k.Resource, k.Namespace, k.Name} {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		h *= 1099511628211 // field separator
	}
	return int(h % uint64(n))
}

// worker runs the jobs of its queue one after the other: an object's jobs all come to one worker,
// in the order they were queued, so one object never has two lookups at once.
func (e *Engine) worker(ctx context.Context, linkers []Linker, jobs <-chan linkJob) {
	for job := range jobs {
		if ctx.Err() == nil {
			e.runLinkJob(ctx, linkers, job)
		}
		e.donePending()
	}
}

func (e *Engine) runLinkJob(ctx context.Context, linkers []Linker, job linkJob) {
	// The linkers' look-ups are bounded by LinkTimeout; writing the links they found is not,
	// so that links survive a sink outage (see exportRetry).
	lookupCtx, cancel := context.WithTimeout(ctx, e.cfg.LinkTimeout)
	defer cancel()
	for _, l := range linkers {
		links, err := l.Lookup(lookupCtx, job.obj)
		if err != nil {
			e.m.linkErrors.Add(ctx, 1, linkerOpt(l.Name())...)
			e.logger.Debug("linker failed", "linker", l.Name(), "object", job.obj.String(), "error", err)
			continue
		}
		for _, link := range links {
			if err := e.emitLink(ctx, job, link); err != nil {
				e.logger.Warn("emit link", "linker", l.Name(), "object", job.obj.String(), "error", err)
				continue
			}
			e.m.links.Add(ctx, 1, linkerOpt(l.Name())...)
		}
	}
	e.m.linkJobs.Add(ctx, 1, resultDone...)
}

// emitLink writes the forward link span in the source trace, the backward one in the target
// trace, and the target's object span when the target has none yet in this window; a new target
// gets its own link job, up to the depth limit.
func (e *Engine) emitLink(ctx context.Context, job linkJob, link Link) error {
	if !link.Role.Valid() {
		return fmt.Errorf("link to %s: unknown role %q", link.Target.String(), link.Role)
	}
	target := link.Target
	if target.Cluster == "" {
		target.Cluster = job.obj.Cluster
	}
	if target.Resource == "" || target.Name == "" {
		return fmt.Errorf("link target %q needs a resource and a name", target.String())
	}
	src := job.obj.ObjectRef
	srcKey, tgtKey := src.Key(), target.Key()
	if srcKey == tgtKey {
		return fmt.Errorf("link from %s to itself", src.String())
	}
	srcTID := TraceIDFor(srcKey, job.window)
	tgtTID := TraceIDFor(tgtKey, job.window)

	spans := make([]*Span, 0, 3)
	spans = append(spans,
		e.linkSpan(src, job, srcTID, target, link.Role, link.Class),
		e.linkSpan(target, job, tgtTID, src, link.Role.reverse(), link.Class),
	)
	newTarget, _ := e.markObject(tgtTID, false, 0) // reached through a link: no body
	if newTarget {
		spans = append(spans, e.objectSpan(target, job.window, tgtTID, ObjectSpanID(tgtTID)))
	}
	if err := e.exportRetry(ctx, spans); err != nil {
		if newTarget {
			e.forgetObject(tgtTID)
		}
		return err
	}
	if newTarget {
		if job.depth+1 < e.cfg.LinkDepth {
			e.enqueueLink(ctx, linkJob{obj: Object{ObjectRef: target}, window: job.window, at: job.at, depth: job.depth + 1})
		} else {
			e.m.linkJobs.Add(ctx, 1, resultDepthLimit...)
		}
	}
	return nil
}

func (e *Engine) linkSpan(holder ObjectRef, job linkJob, tid trace.TraceID, target ObjectRef, role Role, class string) *Span {
	attrs := Attrs{
		{AttrLinkCluster, target.Cluster},
		{AttrLinkGroup, target.Group},
		{AttrLinkResource, target.Resource},
		{AttrLinkNamespace, target.Namespace},
		{AttrLinkName, target.Name},
		{AttrLinkRole, string(role)},
	}
	if class != "" {
		attrs = append(attrs, Attr{AttrLinkClass, class})
	}
	return &Span{
		TraceID:    tid,
		SpanID:     LinkSpanID(tid, target.Key(), role),
		ParentID:   ObjectSpanID(tid),
		Kind:       KindLink,
		Source:     string(KindLink),
		Name:       holder.Resource + "/" + holder.Name,
		Object:     holder,
		Window:     job.window,
		Start:      job.at,
		End:        job.at,
		Attributes: attrs,
		Link:       &Link{Target: target, Role: role, Class: class},
	}
}

var (
	_ SinkSyncer         = (*Engine)(nil)
	_ SinkHealthReporter = (*Engine)(nil)
)
