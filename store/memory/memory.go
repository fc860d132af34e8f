package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Store is the in-memory store, bounded by a number of spans. It is meant for tests and for runs
// without a data directory; everything is lost on exit.
type Store struct {
	maxSpans int
	length   time.Duration

	mu      sync.RWMutex
	traces  map[trace.TraceID]*memTrace
	objects map[aggregator.ObjectKey]map[trace.TraceID]*memTrace
	windows map[int64][]*memTrace
	order   []int64 // keys of windows, ascending
	spans   int
	stats   Stats
	feed    *changefeed.Feed
}

type memTrace struct {
	id     trace.TraceID
	window int64
	key    aggregator.ObjectKey
	ref    aggregator.ObjectRef // of the latest object span, or of the first span
	spans  map[trace.SpanID]*aggregator.Span
}

// Stats counts what a memory store holds and what it dropped to stay within MaxSpans.
type Stats struct {
	Spans   int
	Windows int
	// DroppedWindows and DroppedSpans count evicted windows and the spans they held, plus spans
	// refused because their window was the oldest one.
	DroppedWindows int64
	DroppedSpans   int64
}

// New returns an empty in-memory store for traces of window length w. Invalid values in cfg
// are replaced by defaults.
func New(cfg Config, w aggregator.Window) *Store {
	if cfg.Validate() != nil {
		cfg = Config{}
	}
	cfg = cfg.withDefaults()
	m := &Store{
		maxSpans: cfg.MaxSpans,
		length:   w.Length(),
		traces:   map[trace.TraceID]*memTrace{},
		objects:  map[aggregator.ObjectKey]map[trace.TraceID]*memTrace{},
		windows:  map[int64][]*memTrace{},
	}
	m.feed = changefeed.NewFeed(m.findChanges)
	return m
}

// Export stores spans, replacing stored spans with the same trace and span ID.
func (m *Store) Export(_ context.Context, spans []*aggregator.Span) error {
	m.mu.Lock()
	for _, sp := range spans {
		m.put(sp)
	}
	m.mu.Unlock()
	m.feed.Publish(spans)
	return nil
}

func (m *Store) put(sp *aggregator.Span) {
	tr := m.traces[sp.TraceID]
	if tr != nil {
		if _, ok := tr.spans[sp.SpanID]; ok {
			tr.spans[sp.SpanID] = sp
			tr.noteRef(sp)
			return
		}
	}
	w := query.WindowNanos(sp)
	if tr != nil {
		w = tr.window // a trace lives in one window
	}
	for m.spans >= m.maxSpans {
		if len(m.order) == 0 || w <= m.order[0] {
			m.stats.DroppedSpans++
			return
		}
		m.evict(m.order[0])
	}
	if tr = m.traces[sp.TraceID]; tr == nil {
		tr = &memTrace{id: sp.TraceID, window: w, key: sp.Object.Key(), ref: sp.Object, spans: map[trace.SpanID]*aggregator.Span{}}
		m.traces[sp.TraceID] = tr
		byTrace := m.objects[tr.key]
		if byTrace == nil {
			byTrace = map[trace.TraceID]*memTrace{}
			m.objects[tr.key] = byTrace
		}
		byTrace[tr.id] = tr
		if _, ok := m.windows[w]; !ok {
			i, _ := slices.BinarySearch(m.order, w)
			m.order = slices.Insert(m.order, i, w)
		}
		m.windows[w] = append(m.windows[w], tr)
	}
	tr.spans[sp.SpanID] = sp
	tr.noteRef(sp)
	m.spans++
}

func (t *memTrace) noteRef(sp *aggregator.Span) {
	if sp.Kind == aggregator.KindObject {
		t.ref = sp.Object
	}
}

func (m *Store) evict(w int64) {
	for _, tr := range m.windows[w] {
		delete(m.traces, tr.id)
		byTrace := m.objects[tr.key]
		delete(byTrace, tr.id)
		if len(byTrace) == 0 {
			delete(m.objects, tr.key)
		}
		m.spans -= len(tr.spans)
		m.stats.DroppedSpans += int64(len(tr.spans))
	}
	delete(m.windows, w)
	if i, ok := slices.BinarySearch(m.order, w); ok {
		m.order = slices.Delete(m.order, i, i+1)
	}
	m.stats.DroppedWindows++
}

// Stats returns the current counts.
func (m *Store) Stats() Stats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.stats
	s.Spans, s.Windows = m.spans, len(m.order)
	return s
}

// FindObjects implements store.Reader.
func (m *Store) FindObjects(ctx context.Context, q query.ObjectQuery) ([]query.ObjectWindows, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("find objects: %w", err)
	}
	match := query.NewMatcher(q, m.length)
	type found struct {
		key string
		ow  query.ObjectWindows
	}
	var all []found

	m.mu.RLock()
	objects := m.objects
	if q.Exact {
		objects = nil
		if byTrace, ok := m.objects[q.Key()]; ok {
			objects = map[aggregator.ObjectKey]map[trace.TraceID]*memTrace{q.Key(): byTrace}
		}
	}
	for key, byTrace := range objects {
		if !match.Object(key) {
			continue
		}
		var newest *memTrace
		var windows []query.ObjectWindow
		for _, tr := range byTrace {
			if !match.Window(tr.window) || (len(q.Attributes) > 0 && !tr.hasEvent(&match)) {
				continue
			}
			windows = append(windows, query.ObjectWindow{Window: query.UnixTime(tr.window), TraceID: tr.id})
			if newest == nil || tr.window > newest.window {
				newest = tr
			}
		}
		if newest != nil {
			all = append(all, found{key: key.String(), ow: query.ObjectWindows{Object: newest.ref, Windows: windows}})
		}
	}
	m.mu.RUnlock()

	slices.SortFunc(all, func(a, b found) int { return strings.Compare(a.key, b.key) })
	if len(all) > match.Limit() {
		all = all[:match.Limit()]
	}
	out := make([]query.ObjectWindows, len(all))
	for i := range all {
		out[i] = all[i].ow
		slices.SortFunc(out[i].Windows, func(a, b query.ObjectWindow) int { return a.Window.Compare(b.Window) })
	}
	return out, nil
}

func (t *memTrace) hasEvent(match *query.Matcher) bool {
	for _, sp := range t.spans {
		if match.Event(sp) {
			return true
		}
	}
	return false
}

// GetTraces implements store.Reader.
func (m *Store) GetTraces(ctx context.Context, ws []query.ObjectWindow) ([][]*aggregator.Span, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get traces: %w", err)
	}
	out := make([][]*aggregator.Span, len(ws))
	m.mu.RLock()
	for i, w := range ws {
		tr := m.traces[w.TraceID]
		if tr == nil || tr.window != w.Window.UnixNano() {
			continue
		}
		spans := make([]*aggregator.Span, 0, len(tr.spans))
		for _, sp := range tr.spans {
			cp := *sp
			spans = append(spans, &cp)
		}
		out[i] = spans
	}
	m.mu.RUnlock()
	for _, spans := range out {
		slices.SortFunc(spans, query.SpanLess)
	}
	return out, nil
}

// FindTraces implements store.Reader.
func (m *Store) FindTraces(ctx context.Context, q query.TraceQuery) ([]query.TraceRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	if err := query.ValidPrefix(q.IDPrefix); err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	match := query.NewMatcher(query.ObjectQuery{From: q.From, To: q.To}, m.length)
	var out []query.TraceRef
	m.mu.RLock()
	for id, tr := range m.traces {
		if bytes.HasPrefix(id[:], q.IDPrefix) && match.Window(tr.window) {
			out = append(out, query.TraceRef{TraceID: id, Window: query.UnixTime(tr.window), Object: tr.ref})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, query.TraceLess)
	return out, nil
}

// Clusters implements store.Reader.
func (m *Store) Clusters(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	seen := map[string]bool{}
	m.mu.RLock()
	for k := range m.objects {
		seen[k.Cluster] = true
	}
	m.mu.RUnlock()
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

// GetTrace implements store.Reader.
func (m *Store) GetTrace(ctx context.Context, id trace.TraceID) ([]*aggregator.Span, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", id, err)
	}
	m.mu.RLock()
	tr := m.traces[id]
	var out []*aggregator.Span
	if tr != nil {
		out = make([]*aggregator.Span, 0, len(tr.spans))
		for _, sp := range tr.spans {
			cp := *sp
			out = append(out, &cp)
		}
	}
	m.mu.RUnlock()
	if len(out) == 0 {
		return nil, fmt.Errorf("get trace %s: %w", id, query.ErrNotFound)
	}
	slices.SortFunc(out, query.SpanLess)
	return out, nil
}

// Start implements store.Store: the memory store has no background work.
func (m *Store) Start(context.Context) error { return nil }

// Stop implements store.Store; the data stays readable.
func (m *Store) Stop(context.Context) error { return nil }

// ChangeFeed returns the store's change feed (internal/changefeed): what was written when, by
// whom, across objects, and the live tail of what it stores.
func (m *Store) ChangeFeed() *changefeed.Feed { return m.feed }

// findChanges answers the feed's queries: it reads the writes of the windows that may hold
// changes in q's range (the memory store keeps no index: it is for tests and small runs).
func (m *Store) findChanges(ctx context.Context, q changefeed.Query) (changefeed.Page, error) {
	if err := ctx.Err(); err != nil {
		return changefeed.Page{}, fmt.Errorf("find changes: %w", err)
	}
	var all []changefeed.Change
	m.mu.RLock()
	from := q.From.UnixNano() - int64(m.length)
	for _, w := range m.order {
		if w < from || (!q.To.IsZero() && w >= q.To.UnixNano()) {
			continue
		}
		for _, tr := range m.windows[w] {
			for _, sp := range tr.spans {
				if c, ok := changefeed.FromSpan(sp); ok {
					all = append(all, c)
				}
			}
		}
	}
	m.mu.RUnlock()
	changefeed.Sort(all)
	i := 0
	return changefeed.Collect(q, func() (time.Time, trace.SpanID, func() (changefeed.Change, error), bool, error) {
		if i == len(all) {
			return time.Time{}, trace.SpanID{}, nil, false, nil
		}
		c := all[i]
		i++
		return c.Time, c.SpanID, func() (changefeed.Change, error) { return c, nil }, true, nil
	}, nil)
}
