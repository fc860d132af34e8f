package aggregator_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// A source sends events; a linker relates objects; a sink receives spans.
func Example() {
	ctx := context.Background()
	sink := &aggregatortest.RecordingSink{}
	rs := aggregator.ObjectRef{Cluster: "prod", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "shop", Name: "web-5d8f"}
	deploy := aggregator.ObjectRef{Cluster: "prod", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop", Name: "web"}
	owner := &aggregatortest.StaticLinker{Links: map[aggregator.ObjectKey][]aggregator.Link{
		rs.Key(): {{Target: deploy, Role: aggregator.RoleParent, Class: "children"}},
	}}
	engine, err := aggregator.New(aggregator.Config{}, aggregator.Deps{
		Sinks:   []aggregator.Sink{sink},
		Linkers: []aggregator.Linker{owner},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = engine.Start(ctx)
	at := time.Date(2026, 11, 29, 17, 9, 30, 0, time.UTC)
	err = engine.Send(ctx, &aggregator.Event{
		Object: aggregator.Object{ObjectRef: rs},
		Source: "audit",
		ID:     "c8de0b48/ResponseComplete",
		Title:  "system:serviceaccount:kube-system:deployment-controller create",
		Start:  at,
		End:    at.Add(12 * time.Millisecond),
	})
	if err != nil {
		fmt.Println(err)
	}
	_ = engine.Stop(ctx) // waits for the link jobs

	fmt.Print(aggregatortest.RenderTrees(sink.Spans()))
	fmt.Println("window:", aggregator.WindowStart(at, aggregator.DefaultWindow).Format(time.TimeOnly))
	// Output:
	// deployments.apps/web ns=shop
	//   replicasets.apps/web-5d8f ns=shop (children)
	//     - audit: system:serviceaccount:kube-system:deployment-controller create
	// window: 17:00:00
}
