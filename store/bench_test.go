package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
)

// benchSpans returns what the aggregator emits for one audit event on a new object: the
// object span, a link span and an event span with ten attributes. i makes the IDs unique.
func benchSpans(i int) []*aggregator.Span {
	obj := aggregator.ObjectRef{
		Cluster: "prod-eu-1", Group: "apps", Version: "v1", Resource: "replicasets",
		Namespace: "payments", Name: fmt.Sprintf("checkout-7d9f8c6b5-%d", i/8), UID: "3f1c2a9e-8d7b-4c6a-9e5f-1a2b3c4d5e6f",
	}
	w := t0.Add(time.Duration(i/1000) * win)
	root := objectSpan(obj, w)
	link := &aggregator.Span{
		TraceID: root.TraceID, ParentID: root.SpanID, Kind: aggregator.KindLink, Source: "link",
		Name: "parent deployments/checkout", Object: obj, Window: w, Start: w, End: w.Add(win),
		Link: &aggregator.Link{Target: aggregator.ObjectRef{Cluster: obj.Cluster, Group: "apps", Resource: "deployments", Namespace: obj.Namespace, Name: "checkout"}, Role: aggregator.RoleParent, Class: "children"},
	}
	link.SpanID = aggregator.LinkSpanID(root.TraceID, link.Link.Target.Key(), link.Link.Role)
	ev := eventSpan(obj, w, fmt.Sprintf("8c2f4a6e-1b3d-4f5a-9c7e-%012d/ResponseComplete", i), time.Duration(i%1000)*time.Millisecond)
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

func benchmarkExport(b *testing.B, s Store) {
	ctx := context.Background()
	batches := make([][]*aggregator.Span, 4096)
	for i := range batches {
		batches[i] = benchSpans(i)
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

func BenchmarkPebbleExport(b *testing.B) {
	benchmarkExport(b, openTestPebble(b, PebbleConfig{}, nil))
}

func BenchmarkMemoryExport(b *testing.B) {
	benchmarkExport(b, NewMemory(MemoryConfig{}, 0))
}

func BenchmarkDecodeSpan(b *testing.B) {
	enc := appendSpan(nil, benchSpans(0)[2])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeSpan(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPebbleGetTrace(b *testing.B) {
	ctx := context.Background()
	p := openTestPebble(b, PebbleConfig{}, nil)
	spans := benchSpans(0)
	for i := range 20 {
		ev := *spans[2]
		ev.SpanID[0] = byte(i)
		spans = append(spans, &ev)
	}
	require.NoError(b, p.Export(ctx, spans))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.GetTrace(ctx, spans[0].TraceID); err != nil {
			b.Fatal(err)
		}
	}
}
