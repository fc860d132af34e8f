package query_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// The engine reads what the aggregator stored: a search finds objects, follows their links and
// merges their windows into a graph, which Render draws as one trace.
func ExampleEngine() {
	ctx := context.Background()
	st := memory.New(memory.Config{}, 0)

	// Ingest: a ReplicaSet owned by a Deployment, and one event about the ReplicaSet.
	deploy := aggregator.ObjectRef{Cluster: "prod", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop", Name: "web"}
	rs := aggregator.ObjectRef{Cluster: "prod", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "shop", Name: "web-5d8f"}
	owner := &aggregatortest.StaticLinker{Links: map[aggregator.ObjectKey][]aggregator.Link{
		rs.Key(): {{Target: deploy, Role: aggregator.RoleParent, Class: "children"}},
	}}
	agg, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{st}, Linkers: []aggregator.Linker{owner}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := agg.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	at := time.Date(2026, 11, 29, 17, 9, 30, 0, time.UTC)
	if err := agg.Send(ctx, &aggregator.Event{
		Object: aggregator.Object{ObjectRef: rs}, Source: "audit", ID: "c8de0b48/ResponseComplete",
		Title: "deployment-controller create", Start: at, End: at.Add(12 * time.Millisecond),
	}); err != nil {
		fmt.Println(err)
		return
	}
	if err := agg.Stop(ctx); err != nil { // runs the link jobs
		fmt.Println(err)
		return
	}

	// Read: find the ReplicaSet, with its owners and their descendants, and draw it as a tree.
	engine := query.NewEngine(st, 0, query.Config{})
	graphs, err := engine.Search(ctx, query.Query{
		Cluster: "prod", Resource: "replicasets", Name: "web-5d8f", From: at.Add(-time.Hour), To: at.Add(time.Hour),
	}, query.LinkFullTree)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range graphs {
		tr := query.Render(g, query.DisplayTree, aggregator.TraceIDFor(g.Seeds[0], g.Anchor.Window))
		printTree(tr)
	}
	// Output:
	// prod deployments: shop web / 17:00:00..17:30:00
	//   replicasets: shop web-5d8f
	//     audit: deployment-controller create
}

// printTree prints a rendered trace's operations, indented by depth.
func printTree(tr query.JaegerTrace) {
	parent := map[string]string{}
	for _, sp := range tr.Spans {
		for _, ref := range sp.References {
			parent[sp.SpanID] = ref.SpanID
		}
	}
	for _, sp := range tr.Spans {
		depth := 0
		for id := parent[sp.SpanID]; id != ""; id = parent[id] {
			depth++
		}
		fmt.Printf("%s%s: %s\n", strings.Repeat("  ", depth), tr.Processes[sp.ProcessID].ServiceName, sp.OperationName)
	}
}
