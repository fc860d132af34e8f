package query

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// The critical-path routes of UIAPI:
//
//	GET /api/critical-path/{traceID}     a CriticalPath: the steps, where the time went and the
//	                                     controllers' reaction times
//	GET /api/controller-times/{traceID}  the controllers' reaction times alone ([]controllerTimes)
//
// traceID is a display ID as the Jaeger API returns it (or a stored trace ID), or a merge ID
// (see mergeID): the members' objects and writes are analysed as one graph (mergeGraphs), so
// the path runs from the earliest first write of a member's root to the last write of any
// member; a step that follows nothing linked (a write of an unrelated member) is "unexplained".
// Both answer in the jaegerResponse envelope and count as heavy requests.
func (a *UIAPI) registerCritical(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/critical-path/{traceID}", a.heavy(a.criticalPath))
	mux.HandleFunc("GET /api/controller-times/{traceID}", a.heavy(a.controllerTimes))
}

// critical resolves the request's trace and analyses it; false means an error answer was written.
func (a *UIAPI) critical(w http.ResponseWriter, r *http.Request) (CriticalPath, bool) {
	raw := r.PathValue("traceID")
	if len(raw) > 32 {
		return a.mergedCritical(w, r, raw)
	}
	id, err := ParseTraceID(raw)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	}
	g, _, err := a.resolve(r.Context(), id)
	switch {
	case errors.Is(err, ErrBadTraceID):
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	case errors.Is(err, ErrTraceNotFound):
		writeJSON(w, http.StatusNotFound, jaegerResponse{Errors: []JaegerError{{Code: http.StatusNotFound, Msg: err.Error(), TraceID: jaegerTraceID(id)}}})
		return CriticalPath{}, false
	case err != nil:
		a.internalError(w, "critical path", err)
		return CriticalPath{}, false
	}
	cp := analyzeCritical(g, jaegerTraceID(id), a.rules)
	if cp.Truncated != "" {
		a.truncated(r.Context())
	}
	return cp, true
}

// mergedCritical analyses the merge of the members of merge ID raw.
func (a *UIAPI) mergedCritical(w http.ResponseWriter, r *http.Request, raw string) (CriticalPath, bool) {
	ids, err := parseMergeID(raw)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	}
	mid := mergeID(ids)
	g, err := a.resolveMerge(r.Context(), ids)
	switch {
	case errors.Is(err, ErrBadTraceID):
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return CriticalPath{}, false
	case errors.Is(err, ErrTraceNotFound):
		writeJSON(w, http.StatusNotFound, jaegerResponse{Errors: []JaegerError{{Code: http.StatusNotFound, Msg: err.Error(), TraceID: mid}}})
		return CriticalPath{}, false
	case err != nil:
		a.internalError(w, "critical path", err)
		return CriticalPath{}, false
	}
	cp := analyzeCritical(g, mid, a.rules)
	if cp.Truncated != "" {
		a.truncated(r.Context())
	}
	return cp, true
}

// resolveMerge resolves every member of a merge (as GET /api/traces/{id} does) and merges their
// graphs; an error names the member.
func (a *UIAPI) resolveMerge(ctx context.Context, ids []trace.TraceID) (*Graph, error) {
	gs := make([]*Graph, 0, len(ids))
	names := make([]string, 0, len(ids))
	for _, id := range ids {
		g, _, err := a.resolve(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", id, err)
		}
		gs = append(gs, g)
		names = append(names, id.String())
	}
	return mergeGraphs(gs, names), nil
}

// mergeGraphs merges graphs into one, for an analysis over an ad-hoc merge: the union of their
// objects (an object in several has the union of its events, by span ID), roots and edges. A
// truncation of a graph is kept with its name (names[i], when given) in front. The graphs are
// not modified.
func mergeGraphs(gs []*Graph, names []string) *Graph {
	out := &Graph{Objects: map[aggregator.ObjectKey]*object{}, Children: map[aggregator.ObjectKey][]edge{},
		References: map[aggregator.ObjectKey][]edge{}, Omitted: map[aggregator.ObjectKey]int{}}
	isRoot := map[aggregator.ObjectKey]bool{}
	edges := map[[2]aggregator.ObjectKey]bool{}
	addEdges := func(into map[aggregator.ObjectKey][]edge, from map[aggregator.ObjectKey][]edge) {
		for p, es := range from {
			for _, e := range es {
				if pair := [2]aggregator.ObjectKey{e.Parent, e.Child}; !edges[pair] {
					edges[pair] = true
					into[p] = append(into[p], e)
				}
			}
		}
	}
	for i, g := range gs {
		if g == nil {
			continue
		}
		if out.From.IsZero() || (!g.From.IsZero() && g.From.Before(out.From)) {
			out.From = g.From
		}
		if g.To.After(out.To) {
			out.To = g.To
		}
		out.Seeds = append(out.Seeds, g.Seeds...)
		for k, o := range g.Objects {
			have, ok := out.Objects[k]
			if !ok {
				out.Objects[k] = o
				continue
			}
			merged := *have
			merged.Events = mergeEvents(have.Events, o.Events)
			out.Objects[k] = &merged
		}
		for _, k := range g.Roots {
			if !isRoot[k] {
				isRoot[k] = true
				out.Roots = append(out.Roots, k)
			}
		}
		addEdges(out.Children, g.Children)
		addEdges(out.References, g.References)
		for k, n := range g.Omitted {
			out.Omitted[k] = max(out.Omitted[k], n)
		}
		if g.Truncated != "" {
			msg := g.Truncated
			if i < len(names) && names[i] != "" {
				msg = names[i] + ": " + msg
			}
			out.Truncated = joinNonEmptyMsg(out.Truncated, msg)
		}
	}
	if len(out.Seeds) > 0 {
		out.AnchorObject = out.Seeds[0]
	}
	return out
}

// mergeEvents is the union of two event lists by span ID, sorted by (Start, SpanID).
func mergeEvents(a, b []*aggregator.Span) []*aggregator.Span {
	seen := make(map[trace.SpanID]bool, len(a)+len(b))
	out := make([]*aggregator.Span, 0, len(a)+len(b))
	for _, evs := range [][]*aggregator.Span{a, b} {
		for _, sp := range evs {
			if !seen[sp.SpanID] {
				seen[sp.SpanID] = true
				out = append(out, sp)
			}
		}
	}
	slices.SortStableFunc(out, func(x, y *aggregator.Span) int {
		return cmp.Or(x.Start.Compare(y.Start), bytes.Compare(x.SpanID[:], y.SpanID[:]))
	})
	return out
}

func (a *UIAPI) criticalPath(w http.ResponseWriter, r *http.Request) {
	if cp, ok := a.critical(w, r); ok {
		writeJSON(w, http.StatusOK, jaegerResponse{Data: cp, Total: len(cp.Steps)})
	}
}

func (a *UIAPI) controllerTimes(w http.ResponseWriter, r *http.Request) {
	if cp, ok := a.critical(w, r); ok {
		writeJSON(w, http.StatusOK, jaegerResponse{Data: cp.Controllers, Total: len(cp.Controllers)})
	}
}
