package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store"
)

// maxDependencyObjects bounds the objects Dependencies reads in one request (besides the
// frontend's span and time budgets).
const maxDependencyObjects = 10_000

// depBatch is how many traces Dependencies reads at once.
const depBatch = 32

// Dependency is one edge of the dependency graph: objects of resource Parent link to objects of
// resource Child, CallCount distinct object pairs.
type Dependency struct {
	Parent    string `json:"parent"`
	Child     string `json:"child"`
	CallCount uint64 `json:"callCount"`
}

// Dependencies answers the graph of object kinds (resources) and how objects link within
// [from, to]: an edge parent -> child for every resource pair, with the number of distinct linked
// object pairs as its call count, sorted. At most maxDependencyObjects objects and MaxSpans spans
// are read, within the memory budget and the context's deadline: the graph of what was read is
// answered.
func (e *Engine) Dependencies(ctx context.Context, from, to time.Time) ([]Dependency, error) {
	r := e.Reader()
	objs, err := r.FindObjects(ctx, store.ObjectQuery{From: from, To: to, Limit: maxDependencyObjects})
	if err != nil {
		return nil, fmt.Errorf("find objects: %w", err)
	}
	var ws []store.ObjectWindow
	for _, o := range objs {
		ws = append(ws, o.Windows...)
	}
	pairs := map[[2]aggregator.ObjectKey]struct{}{}
	read := 0
	for i := 0; i < len(ws) && read < e.cfg.MaxSpans; i += depBatch {
		traces, err := r.GetTraces(ctx, ws[i:min(i+depBatch, len(ws))])
		if err != nil {
			if len(pairs) > 0 && errors.Is(err, context.DeadlineExceeded) {
				break // answer the graph of what was read in time
			}
			return nil, fmt.Errorf("read traces: %w", err)
		}
		for _, spans := range traces {
			read += len(spans)
			for _, sp := range spans {
				if p, ok := linkPair(sp); ok {
					pairs[p] = struct{}{}
				}
			}
		}
		if !e.Charge(ctx, pairsBytes(traces)) {
			break // the memory budget has no room: answer the graph of what was read
		}
	}
	counts := map[[2]string]int64{}
	for p := range pairs {
		counts[[2]string{p[0].Resource, p[1].Resource}]++
	}
	out := make([]Dependency, 0, len(counts))
	for k, n := range counts {
		out = append(out, Dependency{Parent: k[0], Child: k[1], CallCount: uint64(n)})
	}
	slices.SortFunc(out, func(a, b Dependency) int {
		if a.Parent != b.Parent {
			if a.Parent < b.Parent {
				return -1
			}
			return 1
		}
		if a.Child < b.Child {
			return -1
		}
		if a.Child > b.Child {
			return 1
		}
		return 0
	})
	return out, nil
}

// pairsBytes is what Dependencies keeps of traces: the spans are dropped once their link
// pairs are taken, so only the link spans count (a pair of object keys each, at most).
func pairsBytes(traces [][]*aggregator.Span) int64 {
	var n int64
	for _, spans := range traces {
		for _, sp := range spans {
			if sp.Kind == aggregator.KindLink {
				n += sp.ApproxBytes()
			}
		}
	}
	return n
}

// linkPair reads a link span as (parent object, child object).
func linkPair(sp *aggregator.Span) ([2]aggregator.ObjectKey, bool) {
	if sp.Kind != aggregator.KindLink {
		return [2]aggregator.ObjectKey{}, false
	}
	a := aggregator.Attrs(sp.Attributes)
	get := func(k string) string { v, _ := a.Get(k); return v }
	target := aggregator.ObjectKey{Cluster: get(aggregator.AttrLinkCluster), Group: get(aggregator.AttrLinkGroup),
		Resource: get(aggregator.AttrLinkResource), Namespace: get(aggregator.AttrLinkNamespace), Name: get(aggregator.AttrLinkName)}
	holder := sp.Object.Key()
	if target.Resource == "" || holder.Resource == "" {
		return [2]aggregator.ObjectKey{}, false
	}
	switch aggregator.Role(get(aggregator.AttrLinkRole)) {
	case aggregator.RoleParent:
		return [2]aggregator.ObjectKey{target, holder}, true
	case aggregator.RoleChild:
		return [2]aggregator.ObjectKey{holder, target}, true
	}
	return [2]aggregator.ObjectKey{}, false
}
