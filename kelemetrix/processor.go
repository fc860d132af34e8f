package kelemetrix

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/telemetry"
)

const meterScope = "github.com/kelemetry/kelemetry/kelemetrix"

// maxBatches bounds the batches waiting in the processor's channel (besides QueueSize events).
const maxBatches = 4096

// Processor turns audit events into metric points. It is an audit.Observer (fed by the audit
// pipeline, dropping and counting what does not fit) and a queue.Target (the queue of a
// webhook, replay or follow of its own, answering ErrFull or waiting when full). Events are
// handled by one goroutine between Start and Stop. Stop handles what was accepted before it.
type Processor struct {
	cfg     Config
	metrics []*compiledMetric
	logger  *slog.Logger
	// now is the clock of the deliveryDelay quantity (tests replace it).
	now func() time.Time

	ch      chan batch
	pending atomic.Int64 // events accepted and not yet handled
	bytes   atomic.Int64 // their auditv1.EventBytes
	room    chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
	stop    chan struct{}
	done    chan struct{}

	processed metric.Int64Counter
	dropped   metric.Int64Counter
	overflow  metric.Int64Counter
	updates   atomic.Int64 // metric points recorded (Updates)
}

// batch is a batch of events of one cluster, or a flush marker (flushed set).
type batch struct {
	cluster string
	events  []*auditv1.Event
	size    int64 // auditv1.EventBytes of events
	flushed chan struct{}
}

// errBytesFull is the error of a batch refused for QueueBytes.
var errBytesFull = fmt.Errorf("kelemetrix queueBytes: %w", queue.ErrFull)

// compiledMetric is a MetricConfig ready to evaluate.
type compiledMetric struct {
	name      string
	kind      string
	quantity  quantityID
	labels    []tagID
	labelKeys []attribute.Key
	stages    uint8 // bit i: stages[i] counts
	tagFilter []compiledTagFilter
	qFilter   []compiledQuantityFilter
	maxSeries int

	counter   metric.Float64Counter
	histogram metric.Float64Histogram

	series map[string]*series
	other  *series
	key    []byte
}

// series is one label set of a metric, with its recording options built once.
type series struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

type compiledTagFilter struct {
	tag    tagID
	oneOf  []string
	re     *regexp.Regexp
	negate bool
}

type compiledQuantityFilter struct {
	quantity  quantityID
	op        op
	threshold float64
}

// New builds a processor of cfg's metrics (cfg is validated; defaults fill its zero fields),
// creating their instruments with ts's meter provider.
func New(cfg Config, ts telemetry.Settings) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kelemetrix config: %w", err)
	}
	cfg = cfg.withDefaults()
	p := &Processor{
		cfg:    cfg,
		logger: ts.Log().With("component", "kelemetrix"),
		now:    time.Now,
		ch:     make(chan batch, maxBatches),
		room:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	own := instrument.NewMeter(ts, meterScope)
	p.processed = own.Counter("kelemetry.kelemetrix.events", "Audit events turned into metric points by kelemetrix.", "{event}", *attribute.EmptySet())
	p.dropped = own.Counter("kelemetry.kelemetrix.dropped_events",
		"Audit events kelemetrix dropped, by reason (queue_full: its queue had queueSize events; queue_bytes: queueBytes; stopped).", "{event}",
		instrument.Sets("reason", "queue_full", "queue_bytes", "stopped")...)
	// By the configured metrics' names, each at 0 from the start.
	metricNames := make([]string, len(cfg.Metrics))
	for i, mc := range cfg.Metrics {
		metricNames[i] = mc.Name
	}
	p.overflow = own.Counter("kelemetry.kelemetrix.series_overflow",
		"Points of kelemetrix metrics recorded in the metric's \"other\" series because it had maxSeries label sets, by metric.", "{point}",
		instrument.Sets("metric", metricNames...)...)
	if err := own.Err(); err != nil {
		p.logger.Warn("kelemetrix", "error", err)
	}
	for old, now := range cfg.renamedTagsUsed() {
		p.logger.Warn("kelemetrix: a tag was renamed: use its new name in the config", "tag", old, "now", now,
			"why", "a label named cluster collides with the one multi-cluster Prometheus setups add")
	}
	meter := instrument.NewMeter(ts, meterScope)
	for _, mc := range cfg.Metrics {
		m, err := compileMetric(mc, cfg, meter)
		if err != nil {
			return nil, err
		}
		p.metrics = append(p.metrics, m)
	}
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("kelemetrix metrics: %w", err)
	}
	return p, nil
}

func compileMetric(mc MetricConfig, cfg Config, meter *instrument.Meter) (*compiledMetric, error) {
	qid, _ := quantityByName(mc.Quantity)
	q := quantities[qid]
	m := &compiledMetric{name: mc.Name, kind: mc.Kind, quantity: qid, maxSeries: mc.MaxSeries,
		series: map[string]*series{}}
	if m.maxSeries == 0 {
		m.maxSeries = cfg.MaxSeries
	}
	for _, l := range mc.Labels {
		id, _ := tagByName(l)
		m.labels = append(m.labels, id)
		m.labelKeys = append(m.labelKeys, attribute.Key(tags[id].name))
	}
	st := mc.Stages
	if len(st) == 0 {
		st = []string{"ResponseComplete", "Panic"}
	}
	for _, s := range st {
		m.stages |= 1 << slices.Index(stages, s)
	}
	for _, f := range mc.TagFilters {
		id, _ := tagByName(f.Tag)
		cf := compiledTagFilter{tag: id, oneOf: f.OneOf, negate: f.Negate}
		if f.Regex != "" {
			re, err := compileFull(f.Regex)
			if err != nil {
				return nil, fmt.Errorf("kelemetrix metric %s: %w", mc.Name, err)
			}
			cf.re = re
		}
		m.tagFilter = append(m.tagFilter, cf)
	}
	for _, f := range mc.QuantityFilters {
		id, _ := quantityByName(f.Quantity)
		o, _ := parseOp(f.Op)
		m.qFilter = append(m.qFilter, compiledQuantityFilter{quantity: id, op: o, threshold: f.Threshold})
	}
	help := mc.Help
	if help == "" {
		help = "kelemetrix: " + mc.Quantity + " of audited requests"
	}
	switch mc.Kind {
	case kindCounter:
		m.counter = meter.FloatCounter(mc.Name, help, q.unit)
	default:
		b := mc.Buckets
		if len(b) == 0 {
			b = q.buckets
		}
		m.histogram = meter.Histogram(mc.Name, help, q.unit, b...)
	}
	other := make([]attribute.KeyValue, len(m.labelKeys))
	for i, k := range m.labelKeys {
		other[i] = k.String(otherValue)
	}
	m.other = newSeries(other)
	return m, nil
}

func newSeries(kvs []attribute.KeyValue) *series {
	set := attribute.NewSet(kvs...)
	return &series{add: []metric.AddOption{metric.WithAttributeSet(set)},
		record: []metric.RecordOption{metric.WithAttributeSet(set)}}
}

// Start starts the goroutine that handles events. It does not block.
func (p *Processor) Start(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped {
		return nil
	}
	p.started = true
	go p.run()
	return nil
}

// Stop stops accepting events, handles those accepted before, and waits for that (or ctx). It is
// safe without Start (accepted events are then discarded).
func (p *Processor) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.stop)
	}
	started := p.started
	p.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kelemetrix stop: %w", ctx.Err())
	}
}

func (p *Processor) run() {
	defer close(p.done)
	ctx := context.Background()
	for {
		select {
		case b := <-p.ch:
			p.handleBatch(ctx, b)
		case <-p.stop:
			for {
				select {
				case b := <-p.ch:
					p.handleBatch(ctx, b)
				default:
					return
				}
			}
		}
	}
}

func (p *Processor) handleBatch(ctx context.Context, b batch) {
	if b.flushed != nil {
		close(b.flushed)
		return
	}
	p.Handle(ctx, b.cluster, b.events)
	p.bytes.Add(-b.size)
	p.pending.Add(-int64(len(b.events)))
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// ObserveAudit hands a batch to the processor without blocking (audit.Observer); a batch that
// does not fit is dropped and counted.
func (p *Processor) ObserveAudit(cluster string, events []*auditv1.Event) {
	if len(p.metrics) == 0 || len(events) == 0 {
		return
	}
	if err := p.Enqueue(context.Background(), cluster, events); err != nil {
		reason := "queue_full"
		switch {
		case errors.Is(err, queue.ErrStopped):
			reason = "stopped"
		case errors.Is(err, errBytesFull):
			reason = "queue_bytes"
		}
		p.dropped.Add(context.Background(), int64(len(events)), metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// Enqueue accepts a batch, or returns an error wrapping queue.ErrFull when it does not fit
// now (QueueSize events or QueueBytes), queue.ErrStopped after Stop. It never blocks.
func (p *Processor) Enqueue(_ context.Context, cluster string, events []*auditv1.Event) error {
	if len(events) == 0 {
		return nil
	}
	select {
	case <-p.stop:
		return queue.ErrStopped
	default:
	}
	n := int64(len(events))
	var size int64
	for _, ev := range events {
		if ev != nil {
			size += auditv1.EventBytes(ev)
		}
	}
	// A batch larger than the queue is taken when the queue is empty, so that it is never refused
	// for ever (the webhook bounds a batch's size).
	if after := p.pending.Add(n); after > int64(p.cfg.QueueSize) && after != n {
		p.pending.Add(-n)
		return fmt.Errorf("kelemetrix: %d events queued: %w", after-n, queue.ErrFull)
	}
	if after := p.bytes.Add(size); after > p.cfg.QueueBytes && after != size {
		p.bytes.Add(-size)
		p.pending.Add(-n)
		return fmt.Errorf("kelemetrix: %d bytes queued: %w", after-size, errBytesFull)
	}
	select {
	case p.ch <- batch{cluster: cluster, events: events, size: size}:
	default:
		p.bytes.Add(-size)
		p.pending.Add(-n)
		return fmt.Errorf("kelemetrix: %d batches queued: %w", maxBatches, queue.ErrFull)
	}
	return nil
}

// EnqueueWait is Enqueue that waits for room, honouring ctx.
func (p *Processor) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	for {
		err := p.Enqueue(ctx, cluster, events)
		if err == nil || !errors.Is(err, queue.ErrFull) {
			return err
		}
		select {
		case <-p.room:
		case <-time.After(50 * time.Millisecond):
		case <-p.stop:
			return queue.ErrStopped
		case <-ctx.Done():
			return fmt.Errorf("kelemetrix enqueue: %w", ctx.Err())
		}
	}
}

// Flush waits until every batch accepted before the call has been handled (needs Start).
func (p *Processor) Flush(ctx context.Context) error {
	// A select picks among ready cases at random: after Stop the queue channel may still have
	// room, so the stop check comes first.
	select {
	case <-p.stop:
		return queue.ErrStopped
	default:
	}
	done := make(chan struct{})
	select {
	case p.ch <- batch{flushed: done}:
	case <-p.stop:
		return queue.ErrStopped
	case <-ctx.Done():
		return fmt.Errorf("kelemetrix flush: %w", ctx.Err())
	}
	select {
	case <-done:
		return nil
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kelemetrix flush: %w", ctx.Err())
	}
}

// Len returns the number of events accepted and not yet handled.
func (p *Processor) Len() int { return int(p.pending.Load()) }

// Bytes returns the estimated memory (auditv1.EventBytes) of the events Len counts.
func (p *Processor) Bytes() int64 { return p.bytes.Load() }

// Updates returns the number of metric points recorded so far.
func (p *Processor) Updates() int64 { return p.updates.Load() }

var _ queue.Target = (*Processor)(nil)
var _ audit.Observer = (*Processor)(nil)

// eventState caches the tags and quantities of one event, computing each on first use.
type eventState struct {
	cluster string
	ev      *auditv1.Event
	env     *quantityEnv

	tagHave uint32
	tags    [32]string
	qHave   uint8
	qOK     uint8
	qs      [8]float64
}

func (s *eventState) tag(id tagID) string {
	if s.tagHave&(1<<id) == 0 {
		s.tags[id] = tags[id].value(s.cluster, s.ev)
		s.tagHave |= 1 << id
	}
	return s.tags[id]
}

func (s *eventState) quantity(id quantityID) (float64, bool) {
	if s.qHave&(1<<id) == 0 {
		v, ok := quantities[id].value(s.env, s.ev)
		s.qs[id] = v
		s.qHave |= 1 << id
		if ok {
			s.qOK |= 1 << id
		}
	}
	return s.qs[id], s.qOK&(1<<id) != 0
}

// Handle records the metric points of events synchronously, on the caller's goroutine. It must
// not run concurrently with itself or with a started processor (the processor's goroutine calls
// it); tests and benchmarks use it directly.
func (p *Processor) Handle(ctx context.Context, cluster string, events []*auditv1.Event) {
	env := quantityEnv{now: p.now(), defaultTimeout: p.cfg.DefaultTimeout}
	var updates int64
	for _, ev := range events {
		if ev == nil {
			continue
		}
		st := eventState{cluster: cluster, ev: ev, env: &env}
		for _, m := range p.metrics {
			if m.observe(ctx, &st, p.overflow) {
				updates++
			}
		}
	}
	p.updates.Add(updates)
	p.processed.Add(ctx, int64(len(events)))
}

// observe records the event in m if it passes m's stages and filters; it reports whether it did.
func (m *compiledMetric) observe(ctx context.Context, st *eventState, overflow metric.Int64Counter) bool {
	if i := slices.Index(stages, st.ev.Stage); i < 0 || m.stages&(1<<i) == 0 {
		return false
	}
	for i := range m.tagFilter {
		if !m.tagFilter[i].pass(st) {
			return false
		}
	}
	for _, f := range m.qFilter {
		v, ok := st.quantity(f.quantity)
		if !ok || !f.op.holds(v, f.threshold) {
			return false
		}
	}
	v, ok := st.quantity(m.quantity)
	if !ok {
		return false
	}
	m.key = m.key[:0]
	for _, id := range m.labels {
		m.key = append(m.key, st.tag(id)...)
		m.key = append(m.key, 0)
	}
	s, ok := m.series[string(m.key)]
	if !ok {
		// maxSeries bounds the exported series, the other series included.
		if len(m.series) >= m.maxSeries-1 {
			s = m.other
			overflow.Add(ctx, 1, metric.WithAttributes(attribute.String("metric", m.name)))
		} else {
			kvs := make([]attribute.KeyValue, len(m.labels))
			for i, id := range m.labels {
				kvs[i] = m.labelKeys[i].String(st.tag(id))
			}
			s = newSeries(kvs)
			m.series[string(m.key)] = s
		}
	}
	if m.counter != nil {
		m.counter.Add(ctx, v, s.add...)
	} else {
		m.histogram.Record(ctx, v, s.record...)
	}
	return true
}

func (f *compiledTagFilter) pass(st *eventState) bool {
	v := st.tag(f.tag)
	match := slices.Contains(f.oneOf, v) || (f.re != nil && f.re.MatchString(v))
	return match != f.negate
}
