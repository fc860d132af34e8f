package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
)

// BenchSpans returns what the aggregator emits for one audit event on a new object: the
// object span, a link span and an event span with ten attributes. i makes the IDs unique.
func BenchSpans(i int) []*aggregator.Span {
	obj := aggregator.ObjectRef{
		Cluster: "prod-eu-1", Group: "apps", Version: "v1", Resource: "replicasets",
		Namespace: "payments", Name: fmt.Sprintf("checkout-7d9f8c6b5-%d", i/8), UID: "3f1c2a9e-8d7b-4c6a-9e5f-1a2b3c4d5e6f",
	}
	w := T0.Add(time.Duration(i/1000) * Win)
	root := ObjectSpan(obj, w)
	link := &aggregator.Span{
		TraceID: root.TraceID, ParentID: root.SpanID, Kind: aggregator.KindLink, Source: "link",
		Name: "parent deployments/checkout", Object: obj, Window: w, Start: w, End: w.Add(Win),
		Link: &aggregator.Link{Target: aggregator.ObjectRef{Cluster: obj.Cluster, Group: "apps", Resource: "deployments", Namespace: obj.Namespace, Name: "checkout"}, Role: aggregator.RoleParent, Class: "children"},
	}
	link.SpanID = aggregator.LinkSpanID(root.TraceID, link.Link.Target.Key(), link.Link.Role)
	ev := EventSpan(obj, w, fmt.Sprintf("8c2f4a6e-1b3d-4f5a-9c7e-%012d/ResponseComplete", i), time.Duration(i%1000)*time.Millisecond)
	ev.Name = "update"
	ev.Attributes = aggregator.Attrs{
		{Key: aggregator.AttrCluster, Value: obj.Cluster},
		{Key: aggregator.AttrNamespace, Value: obj.Namespace},
		{Key: aggregator.AttrResource, Value: obj.Resource},
		{Key: aggregator.AttrName, Value: obj.Name},
		{Key: aggregator.AttrUser, Value: "system:serviceaccount:kube-system:replicaset-controller"},
		{Key: aggregator.AttrUserAgent, Value: "kube-controller-manager/v1.31.0 (linux/amd64) kubernetes/abcdef0/system:serviceaccount:kube-system:replicaset-controller"},
		{Key: aggregator.AttrStatusCode, Value: "200"},
		{Key: aggregator.AttrSourceIP, Value: "10.0.12.7"},
		{Key: aggregator.AttrVerb, Value: "update"},
		{Key: aggregator.AttrAuditID, Value: "8c2f4a6e-1b3d-4f5a-9c7e-2d4f6a8b0c1e"},
	}
	ev.Logs = []aggregator.Log{{Time: ev.Start, Type: aggregator.LogTypeDiff, Message: "spec.replicas 3 -> 4"}}
	return []*aggregator.Span{root, link, ev}
}

// BenchmarkExport measures the Export of BenchSpans batches into s, with new event spans in
// the same traces once every batch was written.
func BenchmarkExport(b *testing.B, s Store) {
	ctx := context.Background()
	batches := make([][]*aggregator.Span, 4096)
	for i := range batches {
		batches[i] = BenchSpans(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		batch := batches[i%len(batches)]
		if i >= len(batches) {
			// New event spans in the same traces: the object and link spans repeat, as they
			// do when the aggregator re-emits them.
			ev := *batch[2]
			ev.SpanID[0] ^= byte(i / len(batches))
			batch = []*aggregator.Span{batch[0], batch[1], &ev}
		}
		if err := s.Export(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
