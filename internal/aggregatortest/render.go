package aggregatortest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kelemetry/kelemetry/aggregator"
)

// RenderTrees renders spans as object trees: every object that has no parent link is a root;
// under each object come its event spans (sorted by start time, then title), then its children
// (sorted by key), found through child link spans. Windows of one object are merged. Times are
// left out, so the rendering depends only on what happened, not on when or in which order it
// was ingested. Objects reached twice are printed once and referenced as "(see above)".
func RenderTrees(spans []*aggregator.Span) string {
	type node struct {
		ref      aggregator.ObjectRef
		events   []*aggregator.Span
		children map[aggregator.ObjectKey]string // child key -> class
		parents  int
	}
	nodes := map[aggregator.ObjectKey]*node{}
	get := func(ref aggregator.ObjectRef) *node {
		k := ref.Key()
		n, ok := nodes[k]
		if !ok {
			n = &node{ref: ref, children: map[aggregator.ObjectKey]string{}}
			nodes[k] = n
		}
		return n
	}
	for _, sp := range spans {
		n := get(sp.Object)
		switch sp.Kind {
		case aggregator.KindEvent:
			n.events = append(n.events, sp)
		case aggregator.KindLink:
			if sp.Link == nil {
				continue
			}
			switch sp.Link.Role {
			case aggregator.RoleChild:
				n.children[sp.Link.Target.Key()] = sp.Link.Class
				get(sp.Link.Target)
			case aggregator.RoleParent:
				get(sp.Link.Target).children[sp.Object.Key()] = sp.Link.Class
			}
		}
	}
	for _, n := range nodes {
		for ck := range n.children {
			nodes[ck].parents++
		}
	}
	keys := make([]aggregator.ObjectKey, 0, len(nodes))
	for k := range nodes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b aggregator.ObjectKey) int { return cmp.Compare(a.String(), b.String()) })

	var b strings.Builder
	printed := map[aggregator.ObjectKey]bool{}
	var walk func(k aggregator.ObjectKey, depth int, class string)
	walk = func(k aggregator.ObjectKey, depth int, class string) {
		n := nodes[k]
		indent := strings.Repeat("  ", depth)
		label := k.Resource + "/" + k.Name
		if k.Group != "" {
			label = k.Resource + "." + k.Group + "/" + k.Name
		}
		if k.Namespace != "" {
			label += " ns=" + k.Namespace
		}
		if class != "" {
			label += " (" + class + ")"
		}
		if printed[k] {
			fmt.Fprintf(&b, "%s%s (see above)\n", indent, label)
			return
		}
		printed[k] = true
		fmt.Fprintf(&b, "%s%s\n", indent, label)
		evs := slices.Clone(n.events)
		slices.SortFunc(evs, func(x, y *aggregator.Span) int {
			return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.Name, y.Name), cmp.Compare(x.SpanID.String(), y.SpanID.String()))
		})
		for _, ev := range evs {
			mark := ""
			if ev.Error {
				mark = " !"
			}
			fmt.Fprintf(&b, "%s  - %s: %s%s\n", indent, ev.Source, ev.Name, mark)
		}
		ck := make([]aggregator.ObjectKey, 0, len(n.children))
		for c := range n.children {
			ck = append(ck, c)
		}
		slices.SortFunc(ck, func(a, b aggregator.ObjectKey) int { return cmp.Compare(a.String(), b.String()) })
		for _, c := range ck {
			walk(c, depth+1, n.children[c])
		}
	}
	for _, k := range keys {
		if nodes[k].parents == 0 {
			walk(k, 0, "")
		}
	}
	// Objects only reachable through cycles.
	for _, k := range keys {
		if !printed[k] {
			walk(k, 0, "")
		}
	}
	return b.String()
}
