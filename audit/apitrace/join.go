package apitrace

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/otlpin"
	"github.com/kelemetry/kelemetry/telemetry"
)

// errFull is returned by accept while the spans waiting for their audit events hold
// Config.MaxPendingBytes: the sender should retry later (429, RESOURCE_EXHAUSTED).
var errFull = fmt.Errorf("apitrace: the spans waiting for their audit events are at their limit: %w", otlpin.ErrFull)

// emitQueue bounds the batches of joined spans waiting for the Exporter.
const emitQueue = 1024

// The points of kelemetry.apitrace.spans.
const (
	spansReceived = iota
	spansJoined
	spansSkipped
	spansExpired
	spansUnmatched
	spansDropped
	spansInvalid
)

// The points of kelemetry.apitrace.requests.
const (
	requestsMatched = iota
	requestsExpired
	requestsEvicted
)

// joiner matches kube-apiserver's request spans to audit event spans by audit ID and writes them
// under the event spans. It is an aggregator.Decorator (it reads event spans, never changes
// them); setExporter gives it the aggregator to write through. start runs its expiry and writer,
// stop ends them. Safe for concurrent use.
type joiner struct {
	cfg Config
	log *slog.Logger
	now func() time.Time
	out atomic.Pointer[exporterBox]

	spans    *instrument.FixedCounter
	requests *instrument.FixedCounter
	webhooks metric.Float64Histogram
	gauge    metric.Registration

	mu      sync.Mutex
	traces  map[[16]byte]*traceEntry
	reqs    map[string]*request
	expiry  []expiryItem // in deadline order
	pending int64        // bytes of the spans waiting

	emits   chan emitItem
	stopped chan struct{}
	wg      sync.WaitGroup
	started bool
}

type exporterBox struct{ Exporter }

// emitItem is a batch for the writer, or (done set) a marker that Flush waits for.
type emitItem struct {
	spans []*aggregator.Span
	done  chan struct{}
}

// eventRef is where an audit event's span is: the join writes the request's spans under it.
type eventRef struct {
	traceID trace.TraceID
	spanID  trace.SpanID
	object  aggregator.ObjectRef
	window  time.Time
}

// traceEntry is one trace of kube-apiserver's while its spans arrive: the spans whose audit ID
// is not known yet (their ancestor with the audit ID has not arrived), and the audit ID of each
// span seen, for children that arrive later.
type traceEntry struct {
	id         [16]byte
	unresolved map[[8]byte]*rspan
	owner      map[[8]byte]string
	deadline   time.Time
	// only is the audit ID of every span resolved so far, while they have one (several: not).
	only    string
	several bool
}

// noteOwner records that a span of te belongs to request auditID.
func (te *traceEntry) noteOwner(auditID string) {
	switch {
	case te.only == "":
		te.only = auditID
	case te.only != auditID:
		te.several = true
	}
}

// request is one audit ID while its spans and its audit event meet.
type request struct {
	auditID  string
	ev       *eventRef
	spans    []*rspan // waiting for ev
	matched  bool
	skip     bool
	deadline time.Time
}

type expiryItem struct {
	deadline time.Time
	trace    [16]byte
	auditID  string // "" for a trace entry
}

// ownerBytes is what remembering one span's audit ID costs.
const ownerBytes = 64

// newJoiner returns a joiner; without setExporter it drops what it joins (counted).
func newJoiner(cfg Config, tel telemetry.Settings) *joiner {
	cfg = cfg.WithDefaults()
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/audit/apitrace")
	j := &joiner{
		cfg: cfg, log: tel.Log().With("component", "apitrace"), now: time.Now,
		traces: map[[16]byte]*traceEntry{}, reqs: map[string]*request{},
		emits: make(chan emitItem, emitQueue), stopped: make(chan struct{}),
	}
	j.spans = m.FixedCounter("kelemetry.apitrace.spans",
		"Request spans received from kube-apiserver (or another OTLP sender), by what became of them: joined under an audit event, skipped (a read, or a write of a Kubernetes Event: no audit event span to join), expired waiting for their audit event, unmatched (no audit ID in their ancestry), dropped (the writer's queue was full or the sinks refused them), invalid.",
		"{span}", instrument.Sets("result", "received", "joined", "skipped", "expired", "unmatched", "dropped", "invalid")...)
	j.requests = m.FixedCounter("kelemetry.apitrace.requests",
		"Requests (audit IDs) by outcome: matched to their audit event, expired (spans that waited in vain), evicted (forced out by maxRequests before the wait ended, spans or not).",
		"{request}", instrument.Sets("result", "matched", "expired", "evicted")...)
	j.webhooks = m.Histogram("kelemetry.apiserver.webhook.duration",
		"Admission webhook calls as kube-apiserver's spans time them, by webhook and type (validating, mutating).",
		"s", 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
	j.gauge = m.Gauge("kelemetry.apitrace.pending_bytes", "Bytes of request spans waiting for their audit events.", "By",
		func() (int64, bool) { j.mu.Lock(); defer j.mu.Unlock(); return j.pending, true })
	return j
}

// setExporter makes j write joined spans through e.
func (j *joiner) setExporter(e Exporter) { j.out.Store(&exporterBox{e}) }

// Name is the Decorator's name.
func (j *joiner) Name() string { return "apiserver-traces" }

// Decorate remembers where an audit event's span is, and writes the spans of its request that
// arrived first. It does not change the span.
func (j *joiner) Decorate(_ context.Context, sp *aggregator.Span) {
	if sp.Kind != aggregator.KindEvent {
		return
	}
	id, ok := sp.Attributes.Get(aggregator.AttrAuditID)
	if !ok || id == "" {
		return
	}
	id = truncateID(id)
	ref := &eventRef{traceID: sp.TraceID, spanID: sp.SpanID, object: sp.Object, window: sp.Window}
	j.mu.Lock()
	r := j.request(id)
	var out []*aggregator.Span
	if r.ev == nil && !r.skip {
		r.ev = ref
		if len(r.spans) > 0 {
			out = j.build(r, r.spans)
			for _, s := range r.spans {
				j.pending -= s.size
			}
			r.spans = nil
		}
	}
	j.mu.Unlock()
	j.emit(out)
}

// request returns the entry of auditID, made (and evicting the oldest beyond MaxRequests) when
// new. j.mu is held.
func (j *joiner) request(auditID string) *request {
	if r := j.reqs[auditID]; r != nil {
		return r
	}
	for len(j.reqs) >= j.cfg.MaxRequests && len(j.expiry) > 0 {
		j.expireFirst(true)
	}
	r := &request{auditID: auditID, deadline: j.now().Add(j.cfg.Wait)}
	j.reqs[auditID] = r
	j.expiry = append(j.expiry, expiryItem{deadline: r.deadline, auditID: auditID})
	return r
}

// accept takes received spans: it counts them, times the admission webhooks, and joins every
// span whose request's audit event is known; the others wait. It returns errFull (taking
// nothing) while the waiting spans are at their limit.
func (j *joiner) accept(ctx context.Context, spans []*rspan, invalid int) error {
	j.spans.Add(spansInvalid, int64(invalid))
	if len(spans) == 0 {
		return nil
	}
	j.mu.Lock()
	if j.pending >= j.cfg.MaxPendingBytes {
		j.mu.Unlock()
		return errFull
	}
	j.spans.Add(spansReceived, int64(len(spans)))
	touched := map[[16]byte]*traceEntry{}
	for _, s := range spans {
		te := j.traces[s.traceID]
		if te == nil {
			te = &traceEntry{id: s.traceID, unresolved: map[[8]byte]*rspan{}, owner: map[[8]byte]string{}, deadline: j.now().Add(j.cfg.Wait)}
			j.traces[s.traceID] = te
			j.expiry = append(j.expiry, expiryItem{deadline: te.deadline, trace: s.traceID})
		}
		if _, dup := te.unresolved[s.id]; dup {
			continue
		}
		if _, dup := te.owner[s.id]; dup {
			continue
		}
		te.unresolved[s.id] = s
		j.pending += s.size
		touched[s.traceID] = te
	}
	var out []*aggregator.Span
	for _, te := range touched {
		out = append(out, j.resolve(te)...)
	}
	j.mu.Unlock()
	for _, s := range spans {
		j.observeWebhook(ctx, s)
	}
	j.emit(out)
	return nil
}

// resolve finds the audit ID of te's unresolved spans (their own, or their nearest ancestor's)
// and hands each resolved span to its request. j.mu is held.
func (j *joiner) resolve(te *traceEntry) []*aggregator.Span {
	var out []*aggregator.Span
	// Until nothing changes: a span resolved may be what another one waited for (a root
	// without the audit ID takes its trace's only request).
	for progress := true; progress; {
		progress = false
		for id, s := range te.unresolved {
			owner := j.ownerOf(te, s)
			if owner == "" {
				continue
			}
			progress = true
			delete(te.unresolved, id)
			out = append(out, j.deliver(te, id, s, owner)...)
		}
	}
	return out
}

// deliver hands a span resolved to request owner: joined when the request's event is known,
// skipped with a skipped request, kept waiting otherwise. j.mu is held.
func (j *joiner) deliver(te *traceEntry, id [8]byte, s *rspan, owner string) []*aggregator.Span {
	var out []*aggregator.Span
	te.owner[id] = owner
	te.noteOwner(owner)
	j.pending += ownerBytes - s.size
	r := j.request(owner)
	switch {
	case r.skip || s.skip:
		if !r.skip {
			r.skip = true
			for _, w := range r.spans {
				j.pending -= w.size
			}
			j.spans.Add(spansSkipped, int64(len(r.spans)))
			r.spans = nil
		}
		j.spans.Add(spansSkipped, 1)
	case r.ev != nil:
		out = append(out, j.build(r, []*rspan{s})...)
	default:
		r.spans = append(r.spans, s)
		j.pending += s.size
	}
	return out
}

// ownerOf is the audit ID of s: its own, or its nearest ancestor's among te's spans; "" while
// unknown.
func (j *joiner) ownerOf(te *traceEntry, s *rspan) string {
	for range 64 { // a deeper or cyclic chain stays unresolved
		if s.auditID != "" {
			return s.auditID
		}
		if s.parent == [8]byte{} {
			// A root without the audit ID (kube-apiserver's authentication span, which runs
			// before the span with the ID): its trace's request, when the trace has one.
			if te.only != "" && !te.several {
				return te.only
			}
			return ""
		}
		if o, ok := te.owner[s.parent]; ok {
			return o
		}
		p, ok := te.unresolved[s.parent]
		if !ok {
			return ""
		}
		s = p
	}
	return ""
}

// build makes the aggregator spans of a request's spans under its event span. j.mu is held.
func (j *joiner) build(r *request, spans []*rspan) []*aggregator.Span {
	if !r.matched {
		r.matched = true
		j.requests.Add(requestsMatched, 1)
	}
	ev := r.ev
	out := make([]*aggregator.Span, 0, len(spans))
	for _, s := range spans {
		parent := ev.spanID
		if !s.root {
			parent = aggregator.RequestSpanID(ev.traceID, ev.spanID, hex.EncodeToString(s.parent[:]))
		}
		out = append(out, &aggregator.Span{
			TraceID: ev.traceID, SpanID: aggregator.RequestSpanID(ev.traceID, ev.spanID, s.idHex()), ParentID: parent,
			Kind: aggregator.KindRequest, Source: s.service, Name: s.name, Object: ev.object, Window: ev.window,
			Start: s.start, End: s.end, Attributes: s.attrs, Logs: s.logs, Error: s.err,
		})
	}
	return out
}

// emit hands joined spans to the writer; a full queue drops them (counted).
func (j *joiner) emit(spans []*aggregator.Span) {
	if len(spans) == 0 {
		return
	}
	select {
	case j.emits <- emitItem{spans: spans}:
	default:
		j.spans.Add(spansDropped, int64(len(spans)))
	}
}

// observeWebhook records an admission webhook call's duration.
func (j *joiner) observeWebhook(ctx context.Context, s *rspan) {
	var kind string
	switch s.name {
	case "Call validating webhook":
		kind = "validating"
	case "Call mutating webhook":
		kind = "mutating"
	default:
		return
	}
	name, _ := s.attrs.Get("webhook")
	j.webhooks.Record(ctx, s.end.Sub(s.start).Seconds(), metric.WithAttributes(
		attribute.String("webhook", name), attribute.String("type", kind)))
}

// expire forgets what waited past its deadline, counting the spans and requests it drops.
func (j *joiner) expire() {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	for len(j.expiry) > 0 && !j.expiry[0].deadline.After(now) {
		j.expireFirst(false)
	}
}

// expireFirst forgets the first entry of the expiry list; evict says it is forced out by
// MaxRequests. j.mu is held.
func (j *joiner) expireFirst(evict bool) {
	it := j.expiry[0]
	j.expiry[0] = expiryItem{}
	j.expiry = j.expiry[1:]
	if it.auditID != "" {
		r := j.reqs[it.auditID]
		if r == nil {
			return
		}
		delete(j.reqs, it.auditID)
		for _, s := range r.spans {
			j.pending -= s.size
		}
		j.spans.Add(spansExpired, int64(len(r.spans)))
		switch {
		case evict:
			// Forced out before its time, spans or not: a join it may have missed.
			j.requests.Add(requestsEvicted, 1)
		case len(r.spans) > 0:
			j.requests.Add(requestsExpired, 1)
		}
		return
	}
	te := j.traces[it.trace]
	if te == nil {
		return
	}
	delete(j.traces, it.trace)
	for _, s := range te.unresolved {
		j.pending -= s.size
	}
	j.pending -= int64(len(te.owner)) * ownerBytes
	j.spans.Add(spansUnmatched, int64(len(te.unresolved)))
}

// pendingSize reports the bytes of the spans waiting and the requests remembered.
func (j *joiner) pendingSize() (bytes int64, requests int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.pending, len(j.reqs)
}

// start runs the writer and the expiry of what waited too long.
func (j *joiner) start() {
	j.mu.Lock()
	if j.started {
		j.mu.Unlock()
		return
	}
	j.started = true
	j.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	j.wg.Add(2)
	go func() {
		defer j.wg.Done()
		<-j.stopped
		cancel()
	}()
	go func() {
		defer j.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-j.stopped:
				j.drain(ctx)
				return
			case it := <-j.emits:
				j.handle(ctx, it)
			case <-tick.C:
				j.expire()
			}
		}
	}()
}

// drain writes what is queued.
func (j *joiner) drain(ctx context.Context) {
	for {
		select {
		case it := <-j.emits:
			j.handle(ctx, it)
		default:
			return
		}
	}
}

func (j *joiner) handle(ctx context.Context, it emitItem) {
	if it.done != nil {
		close(it.done)
		return
	}
	j.write(ctx, it.spans)
}

func (j *joiner) write(ctx context.Context, spans []*aggregator.Span) {
	box := j.out.Load()
	if box == nil {
		j.spans.Add(spansDropped, int64(len(spans)))
		return
	}
	if err := box.ExportSpans(ctx, spans); err != nil {
		j.spans.Add(spansDropped, int64(len(spans)))
		j.log.Warn("writing request spans failed", "spans", len(spans), "error", err)
		return
	}
	j.spans.Add(spansJoined, int64(len(spans)))
}

// flush returns once the joined spans queued so far are written (or ctx ends).
func (j *joiner) flush(ctx context.Context) {
	j.mu.Lock()
	started := j.started
	j.mu.Unlock()
	if !started {
		j.drain(ctx)
		return
	}
	done := make(chan struct{})
	select {
	case j.emits <- emitItem{done: done}:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// stop ends the writer (writing what is queued) and the expiry. It is safe without Start.
func (j *joiner) stop(ctx context.Context) error {
	j.mu.Lock()
	started := j.started
	j.started = false
	j.mu.Unlock()
	if started {
		close(j.stopped)
		done := make(chan struct{})
		go func() { j.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return j.gauge.Unregister()
}
