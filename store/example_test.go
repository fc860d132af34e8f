package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/memory"
)

func Example() {
	ctx := context.Background()
	s := memory.New(memory.Config{}, 0) // or pebble.Open for a persistent store
	defer func() { _ = s.Stop(ctx) }()

	obj := aggregator.ObjectRef{Cluster: "prod", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop", Name: "web"}
	window := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	tid := aggregator.TraceIDFor(obj.Key(), window)
	root := &aggregator.Span{
		TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindObject, Source: "object",
		Name: "deployments/web", Object: obj, Window: window, Start: window, End: window.Add(30 * time.Minute),
	}
	if err := s.Export(ctx, []*aggregator.Span{root}); err != nil {
		panic(err)
	}

	found, _ := s.FindObjects(ctx, store.ObjectQuery{Cluster: "prod", Name: "web", From: window.Add(time.Minute)})
	for _, o := range found {
		fmt.Println(o.Object, len(o.Windows))
		spans, _ := s.GetTrace(ctx, o.Windows[0].TraceID)
		fmt.Println(spans[0].Name)
	}
	// Output:
	// prod/apps/deployments/shop/web 1
	// deployments/web
}
