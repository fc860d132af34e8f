package jaeger

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// servicesTTL is how long the backend's service list is reused.
const servicesTTL = 30 * time.Second

// FindObjects finds objects. An exact key over a short range is read by its computed trace IDs
// (no search); otherwise the object spans (or, with q.Attributes, the event spans) are searched by
// attributes, and each object found is named by reading its newest window.
func (j *Store) FindObjects(ctx context.Context, q query.ObjectQuery) ([]query.ObjectWindows, error) {
	m := query.NewMatcher(q, j.window)
	if q.Exact && m.HasFrom && m.HasTo {
		first := aggregator.WindowStart(q.From, j.window)
		if n := q.To.Sub(first)/j.window + 1; n <= time.Duration(j.cfg.ProbeWindows) {
			return j.probe(ctx, &m, first)
		}
	}
	return j.search(ctx, &m)
}

// FindExact finds the windows of many objects at once (see ExactFinder): over a range of at most
// ProbeWindows windows, every window of every key is read by its computed trace ID, in batches;
// over a longer one, each key is searched.
func (j *Store) FindExact(ctx context.Context, keys []aggregator.ObjectKey, from, to time.Time) ([]query.ObjectWindows, error) {
	out := make([]query.ObjectWindows, len(keys))
	first := aggregator.WindowStart(from, j.window)
	if from.IsZero() || to.IsZero() || to.Sub(first)/j.window+1 > time.Duration(j.cfg.ProbeWindows) {
		for i, k := range keys {
			found, err := j.FindObjects(ctx, query.Exact(k, from, to))
			if err != nil {
				return nil, err
			}
			if len(found) > 0 {
				out[i] = found[0]
			}
		}
		return out, nil
	}
	var ws []query.ObjectWindow
	var owner []int
	for i, k := range keys {
		m := query.NewMatcher(query.Exact(k, from, to), j.window)
		for w := first; !w.After(to); w = w.Add(j.window) {
			if m.Window(w.UnixNano()) {
				ws = append(ws, query.ObjectWindow{Window: w, TraceID: aggregator.TraceIDFor(k, w)})
				owner = append(owner, i)
			}
		}
	}
	traces, err := j.GetTraces(ctx, ws)
	if err != nil {
		return nil, err
	}
	for n, spans := range traces {
		i := owner[n]
		ref, ok := query.TraceObject(spans)
		if !ok || ref.Key() != keys[i] {
			continue
		}
		out[i].Object = ref
		out[i].Windows = append(out[i].Windows, ws[n])
	}
	return out, nil
}

// probe reads the windows of one object (m.Q names its key) from first to m.Q.To.
func (j *Store) probe(ctx context.Context, m *query.Matcher, first time.Time) ([]query.ObjectWindows, error) {
	key := m.Q.Key()
	var ws []query.ObjectWindow
	for w := first; !w.After(m.Q.To); w = w.Add(j.window) {
		if m.Window(w.UnixNano()) {
			ws = append(ws, query.ObjectWindow{Window: w, TraceID: aggregator.TraceIDFor(key, w)})
		}
	}
	traces, err := j.GetTraces(ctx, ws)
	if err != nil {
		return nil, err
	}
	var res query.ObjectWindows
	for i, spans := range traces {
		ref, ok := j.objectIn(spans, m)
		if !ok || ref.Key() != key {
			continue
		}
		res.Object = ref
		res.Windows = append(res.Windows, ws[i])
	}
	if len(res.Windows) == 0 {
		return nil, nil
	}
	return []query.ObjectWindows{res}, nil
}

// objectIn returns the object of one window's spans when they match m's attributes.
func (j *Store) objectIn(spans []*aggregator.Span, m *query.Matcher) (aggregator.ObjectRef, bool) {
	ref, ok := query.TraceObject(spans)
	if !ok || !m.Object(ref.Key()) {
		return ref, false
	}
	if len(m.Q.Attributes) > 0 && !slices.ContainsFunc(spans, m.Event) {
		return ref, false
	}
	return ref, true
}

// foundObject is the windows of one object a search found, before its key is known.
type foundObject struct {
	windows []query.ObjectWindow
}

// search finds objects by attributes.
func (j *Store) search(ctx context.Context, m *query.Matcher) ([]query.ObjectWindows, error) {
	q := &m.Q
	services := []string{string(aggregator.KindObject)}
	if len(q.Attributes) > 0 {
		var err error
		if services, err = j.eventServices(ctx); err != nil {
			return nil, err
		}
	}
	var attrs []*storagev2.KeyValue
	for _, a := range [...][2]string{
		{aggregator.AttrCluster, q.Cluster}, {aggregator.AttrGroup, q.Group}, {aggregator.AttrResource, q.Resource},
		{aggregator.AttrNamespace, q.Namespace}, {aggregator.AttrName, q.Name},
	} {
		if a[1] != "" {
			attrs = append(attrs, stringKV(a[0], a[1]))
		}
	}
	for _, a := range q.Attributes {
		attrs = append(attrs, stringKV(a.Key, a.Value))
	}
	from, to := time.Unix(0, 0), j.now().Add(query.DefaultMaxFutureSkew)
	if m.HasTo {
		to = q.To
	}
	if m.HasFrom {
		from = q.From
		if len(q.Attributes) == 0 {
			from = from.Add(-j.window) // object spans start at their window's start
		}
	}
	groups := map[string]*foundObject{}
	var order []string
	for _, svc := range services {
		ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
		resp, err := j.client.FindTraceIDs(ctx, &storagev2.FindTracesRequest{Query: &storagev2.TraceQueryParameters{
			ServiceName: svc, Attributes: attrs, StartTimeMin: timestamppb.New(from), StartTimeMax: timestamppb.New(to),
			SearchDepth: int32(min(j.cfg.SearchDepth, math.MaxInt32)), // bounded
		}})
		if err != nil {
			err = j.readError(ctx, "FindTraceIDs", err)
			cancel()
			return nil, err
		}
		j.ok(ctx, "FindTraceIDs")
		cancel()
		if len(resp.GetTraceIds()) >= j.cfg.SearchDepth {
			j.truncated.Add(ctx, 1)
			j.logger.Warn("search reached jaeger.searchDepth: objects beyond it are missed; narrow the search", "searchDepth", j.cfg.SearchDepth, "service", svc)
		}
		for _, f := range resp.GetTraceIds() {
			var id trace.TraceID
			if len(f.GetTraceId()) != len(id) {
				continue
			}
			copy(id[:], f.GetTraceId())
			gk := string(id[:])
			w := aggregator.WindowStart(f.GetStart().AsTime(), j.window)
			if oh, tw, ok := aggregator.ParseTraceID(id); ok {
				gk, w = string(oh[:]), tw
			}
			if !m.Window(w.UnixNano()) {
				continue
			}
			g := groups[gk]
			if g == nil {
				g = &foundObject{}
				groups[gk] = g
				order = append(order, gk)
			}
			if !slices.ContainsFunc(g.windows, func(x query.ObjectWindow) bool { return x.TraceID == id }) {
				g.windows = append(g.windows, query.ObjectWindow{Window: w, TraceID: id})
			}
		}
	}
	// Name each object by reading windows, newest first: the newest only when no event
	// attribute must be checked, each of them otherwise.
	var reads []query.ObjectWindow
	for _, gk := range order {
		g := groups[gk]
		slices.SortFunc(g.windows, func(a, b query.ObjectWindow) int { return b.Window.Compare(a.Window) })
		if len(q.Attributes) == 0 {
			reads = append(reads, g.windows[0])
		} else {
			reads = append(reads, g.windows...)
		}
	}
	traces, err := j.GetTraces(ctx, reads)
	if err != nil {
		return nil, err
	}
	byKey := map[aggregator.ObjectKey]*query.ObjectWindows{}
	newest := map[aggregator.ObjectKey]time.Time{}
	add := func(ref aggregator.ObjectRef, ws ...query.ObjectWindow) {
		k := ref.Key()
		o := byKey[k]
		if o == nil {
			o = &query.ObjectWindows{Object: ref}
			byKey[k] = o
		}
		for _, w := range ws {
			if w.Window.After(newest[k]) || newest[k].IsZero() {
				newest[k], o.Object = w.Window, ref
			}
			if !slices.ContainsFunc(o.Windows, func(x query.ObjectWindow) bool { return x.TraceID == w.TraceID }) {
				o.Windows = append(o.Windows, w)
			}
		}
	}
	i := 0
	for _, gk := range order {
		g := groups[gk]
		if len(q.Attributes) == 0 {
			if ref, ok := j.objectIn(traces[i], m); ok {
				add(ref, g.windows...)
			}
			i++
			continue
		}
		for _, w := range g.windows {
			if ref, ok := j.objectIn(traces[i], m); ok {
				add(ref, w)
			}
			i++
		}
	}
	out := make([]query.ObjectWindows, 0, len(byKey))
	for _, o := range byKey {
		slices.SortFunc(o.Windows, func(a, b query.ObjectWindow) int { return a.Window.Compare(b.Window) })
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b query.ObjectWindows) int {
		return cmp.Compare(a.Object.Key().String(), b.Object.Key().String())
	})
	if len(out) > m.Limit() {
		out = out[:m.Limit()]
	}
	return out, nil
}

// eventServices lists the backend's services that hold event spans (all but the object, link and
// cluster marker services), cached for a while.
func (j *Store) eventServices(ctx context.Context) ([]string, error) {
	j.servicesMu.Lock()
	defer j.servicesMu.Unlock()
	if j.services != nil && j.now().Sub(j.servicesAt) < servicesTTL {
		return j.services, nil
	}
	ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	resp, err := j.client.GetServices(ctx, &storagev2.GetServicesRequest{})
	if err != nil {
		return nil, j.readError(ctx, "GetServices", err)
	}
	j.ok(ctx, "GetServices")
	out := []string{}
	for _, s := range resp.GetServices() {
		switch s {
		case string(aggregator.KindObject), string(aggregator.KindLink), clusterService:
		default:
			out = append(out, s)
		}
	}
	slices.Sort(out)
	j.services, j.servicesAt = out, j.now()
	return out, nil
}

func stringKV(key, value string) *storagev2.KeyValue {
	return &storagev2.KeyValue{Key: key, Value: &storagev2.AnyValue{Value: &storagev2.AnyValue_StringValue{StringValue: value}}}
}
