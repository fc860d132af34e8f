package query

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// UIAPI serves what the built-in web UI needs besides the Jaeger API: short search results and
// search-field suggestions drawn from stored data.
//
//	GET /api/ui/search?<the parameters of GET /api/traces>   one SearchSummary per result
//	GET /api/ui/suggestions?cluster=&start=&end=             a Suggestions
//	GET /api/critical-path/{traceID}                          a CriticalPath
//	GET /api/controller-times/{traceID}                       []controllerTimes
//	GET /api/changes?...                                      the change feed (changesapi.go)
//
// Both answer in the jaegerResponse envelope; errors carry a code and a message.
type UIAPI struct {
	queryAPI
	rules []CausalRule
	tail  tailMetrics
}

// NewUIAPI serves the web UI's API over the engine's store. The critical path follows the
// engine's Config.CausalRules (DefaultCausalRules when unset).
func NewUIAPI(e *Engine, tel telemetry.Settings) *UIAPI {
	return &UIAPI{queryAPI: newQueryAPI(e, tel, "ui"), rules: e.cfg.CausalRules, tail: newTailMetrics(instrument.NewMeter(tel, meterScope))}
}

// WithCausalRules replaces the rules the critical path follows (Config.CausalRules, or
// DefaultCausalRules by default) and returns a; nil means DefaultCausalRules.
func (a *UIAPI) WithCausalRules(rules []CausalRule) *UIAPI {
	a.rules = rules
	return a
}

// Register adds the routes to mux. All count as heavy requests (Config.MaxConcurrent).
func (a *UIAPI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/ui/search", a.heavy(a.search))
	mux.HandleFunc("GET /api/ui/suggestions", a.heavy(a.suggestions))
	a.registerCritical(mux)
	a.registerChanges(mux)
}

// SummaryObject names one object of a SearchSummary.
type SummaryObject struct {
	Cluster   string `json:"cluster"`
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func summaryObject(k aggregator.ObjectKey) SummaryObject {
	return SummaryObject{Cluster: k.Cluster, Group: k.Group, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
}

// SearchSummary describes one search result without drawing it.
type SearchSummary struct {
	// TraceID is the display ID of the result in the searched mode (GET /api/traces/{traceID}).
	TraceID string `json:"traceID"`
	// Root is the top object of the tree; with several roots, the first.
	Root SummaryObject `json:"root"`
	// Roots counts the tree roots (more than one are shown under a synthetic root).
	Roots int `json:"roots"`
	// Seed is the found object that anchors the result.
	Seed SummaryObject `json:"seed"`
	// Objects and Events count what the result holds; Omitted counts what budgets left out.
	Objects int `json:"objects"`
	Events  int `json:"events"`
	Omitted int `json:"omitted"`
	// Start and End span the result's events, or its objects' windows when it has none.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Clusters are the clusters of the result's objects, sorted.
	Clusters []string `json:"clusters"`
	// Truncated, when set, says which budget of the request ran out (Graph.Truncated).
	Truncated string `json:"truncated,omitempty"`
	// Matches are, for a search on event attributes, the result's events that have them all,
	// newest first, at most maxSummaryMatches; MatchCount counts them all.
	Matches    []matchedEvent `json:"matches,omitempty"`
	MatchCount int            `json:"matchCount,omitempty"`
}

// matchedEvent is an event of a result that a search's event attributes matched: who did what
// to which object, when, with which outcome.
type matchedEvent struct {
	Time        time.Time     `json:"time"`
	Object      SummaryObject `json:"object"`
	User        string        `json:"user"`
	Verb        string        `json:"verb,omitempty"`
	Subresource string        `json:"subresource,omitempty"`
	Code        string        `json:"code,omitempty"`
	Error       bool          `json:"error,omitempty"`
	Title       string        `json:"title"`
}

// maxSummaryMatches bounds the matched events a search result lists.
const maxSummaryMatches = 5

// matches lists the events of g that have every attribute of want, within [from, to].
func matches(g *Graph, want aggregator.Attrs, from, to time.Time) ([]matchedEvent, int) {
	if len(want) == 0 {
		return nil, 0
	}
	var out []matchedEvent
	n := 0
	for k, o := range g.Objects {
		for _, sp := range o.Events {
			if (!from.IsZero() && sp.Start.Before(from)) || (!to.IsZero() && sp.Start.After(to)) || !hasAll(sp.Attributes, want) {
				continue
			}
			n++
			user, _ := sp.Attributes.Get(aggregator.AttrUser)
			verb, _ := sp.Attributes.Get(aggregator.AttrVerb)
			sub, _ := sp.Attributes.Get(aggregator.AttrSubresource)
			code, _ := sp.Attributes.Get(aggregator.AttrStatusCode)
			out = append(out, matchedEvent{Time: sp.Start.UTC(), Object: summaryObject(k), User: user, Verb: verb,
				Subresource: sub, Code: code, Error: sp.Error, Title: sp.Name})
		}
	}
	slices.SortFunc(out, func(a, b matchedEvent) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(a.Title, b.Title))
	})
	if len(out) > maxSummaryMatches {
		out = out[:maxSummaryMatches]
	}
	return out, n
}

// hasAll reports whether attrs holds every attribute of want with its value.
func hasAll(attrs, want aggregator.Attrs) bool {
	for _, a := range want {
		if v, ok := attrs.Get(a.Key); !ok || v != a.Value {
			return false
		}
	}
	return true
}

// summarize describes a graph; id is its display ID.
func summarize(g *Graph, id displayID) SearchSummary {
	s := SearchSummary{TraceID: jaegerTraceID(id.TraceID()), Roots: len(g.Roots), Objects: len(g.Objects), Clusters: []string{},
		Truncated: g.Truncated}
	if len(g.Roots) > 0 {
		s.Root = summaryObject(g.Roots[0])
	}
	if len(g.Seeds) > 0 {
		s.Seed = summaryObject(g.Seeds[0])
	}
	clusters := map[string]bool{}
	var evStart, evEnd, objStart, objEnd time.Time
	grow := func(start, end *time.Time, s, e time.Time) {
		if s.IsZero() {
			return
		}
		if start.IsZero() || s.Before(*start) {
			*start = s
		}
		if e.After(*end) {
			*end = e
		}
	}
	for k, o := range g.Objects {
		if k.Cluster != "" && !clusters[k.Cluster] {
			clusters[k.Cluster] = true
			s.Clusters = append(s.Clusters, k.Cluster)
		}
		s.Events += len(o.Events)
		for _, ev := range o.Events {
			grow(&evStart, &evEnd, ev.Start, ev.End)
		}
		grow(&objStart, &objEnd, o.Start, o.End)
	}
	for _, n := range g.Omitted {
		s.Omitted += n
	}
	slices.Sort(s.Clusters)
	s.Start, s.End = evStart, evEnd
	if evStart.IsZero() {
		s.Start, s.End = objStart, objEnd
	}
	s.Start, s.End = s.Start.UTC(), s.End.UTC()
	return s
}

func (a *UIAPI) search(w http.ResponseWriter, r *http.Request) {
	req, err := ParseSearch(r.URL.Query(), a.now())
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	res, err := a.engine.SearchResults(r.Context(), req.Query, req.Mode.Link)
	if err != nil {
		a.internalError(w, "search", err)
		return
	}
	graphs := res.Graphs
	out := make([]SearchSummary, 0, len(graphs))
	var t truncation
	b := newRenderBudget(r.Context(), a.cfg.MaxRenderBytes)
	left := 0
	for _, g := range graphs {
		t.add(g.Truncated)
		id := newDisplayID(req.Mode, req.Query.From, req.Query.To, g.AnchorObject, g.Anchor.TraceID)
		s := summarize(g, id)
		s.Matches, s.MatchCount = matches(g, req.Query.Attributes, req.Query.From, req.Query.To)
		if d := s.End.Sub(s.Start); (req.MinDuration > 0 && d < req.MinDuration) || (req.MaxDuration > 0 && d > req.MaxDuration) {
			continue
		}
		if !b.take(&s, false) {
			left++
			continue
		}
		out = append(out, s)
	}
	if left > 0 {
		t.add(fmt.Sprintf("%s (%d more results left out)", b.message(), left))
	}
	// Newest activity first, as Jaeger's "Most recent"; ties by trace ID, for a stable page.
	slices.SortStableFunc(out, func(x, y SearchSummary) int {
		if c := y.End.Compare(x.End); c != 0 {
			return c
		}
		return strings.Compare(x.TraceID, y.TraceID)
	})
	limit := req.Query.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	resp := jaegerResponse{Data: out, Total: len(out), Limit: limit, More: res.More, Unshown: res.Unshown, ScanCut: res.ScanCut}
	if t.apply(w, &resp) {
		a.truncated(r.Context())
	}
	writeJSON(w, http.StatusOK, resp)
}

// suggestedResource is a group/resource pair seen in the store.
type suggestedResource struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
}

// suggestions are values of the search fields found among stored objects.
type suggestions struct {
	Clusters   []string            `json:"clusters"`
	Resources  []suggestedResource `json:"resources"`
	Namespaces []string            `json:"namespaces"`
	// Oldest and Newest bound the windows of the scanned objects (the end of the newest
	// window); zero when nothing is stored.
	Oldest time.Time `json:"oldest,omitzero"`
	Newest time.Time `json:"newest,omitzero"`
	// Truncated is set when more objects matched than were scanned.
	Truncated bool `json:"truncated"`
}

// suggestScan bounds the objects one suggestions request reads.
const suggestScan = 5000

func (a *UIAPI) suggestions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req, err := ParseSearch(q, a.now())
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// Without start, end or lookback the whole store is scanned: the UI learns where data is.
	if q.Get("start") == "" && q.Get("end") == "" && q.Get("lookback") == "" {
		req.Query.From, req.Query.To = time.Time{}, time.Time{}
	}
	ctx := r.Context()
	clusters, err := a.reader.Clusters(ctx)
	if err != nil {
		a.internalError(w, "list clusters", err)
		return
	}
	found, err := a.reader.FindObjects(ctx, store.ObjectQuery{
		Cluster: strings.TrimSpace(q.Get("cluster")), From: req.Query.From, To: req.Query.To, Limit: suggestScan,
	})
	if err != nil {
		a.internalError(w, "find objects", err)
		return
	}
	s := suggestions{Clusters: clusters, Resources: []suggestedResource{}, Namespaces: []string{}, Truncated: len(found) >= suggestScan}
	if s.Clusters == nil {
		s.Clusters = []string{}
	}
	seenRes := map[suggestedResource]bool{}
	seenNS := map[string]bool{}
	window := a.engine.Window()
	for _, f := range found {
		for _, w := range f.Windows {
			if s.Oldest.IsZero() || w.Window.Before(s.Oldest) {
				s.Oldest = w.Window.UTC()
			}
			if end := w.Window.Add(window).UTC(); end.After(s.Newest) {
				s.Newest = end
			}
		}
		res := suggestedResource{Group: f.Object.Group, Resource: f.Object.Resource}
		if res.Resource != "" && !seenRes[res] {
			seenRes[res] = true
			s.Resources = append(s.Resources, res)
		}
		if ns := f.Object.Namespace; ns != "" && !seenNS[ns] {
			seenNS[ns] = true
			s.Namespaces = append(s.Namespaces, ns)
		}
	}
	slices.SortFunc(s.Resources, func(x, y suggestedResource) int {
		if c := strings.Compare(x.Resource, y.Resource); c != 0 {
			return c
		}
		return strings.Compare(x.Group, y.Group)
	})
	slices.Sort(s.Namespaces)
	writeJSON(w, http.StatusOK, jaegerResponse{Data: s})
}
