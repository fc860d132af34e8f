package remotelinker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// BenchmarkRoundTrip measures one link job through a real nats-server on loopback: encode, request,
// worker lookup (one link), reply, decode; in parallel, as the aggregator's link workers do.
func BenchmarkRoundTrip(b *testing.B) {
	url := natsServer(b)
	l := &funcLinker{name: "bench", fn: func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
		return []aggregator.Link{{Target: cm, Role: aggregator.RoleChild, Class: "volumes"}}, nil
	}}
	startWorker(b, connect(b, url), l, WorkerConfig{Concurrency: 64}, telemetry.Settings{})
	c, err := NewClient(connect(b, url), LinkerConfig{Name: "bench", MaxInFlight: 64}, telemetry.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	obj := aggregator.Object{ObjectRef: pod, Body: json.RawMessage(`{"kind":"Pod","spec":{"volumes":[{"name":"a","configMap":{"name":"settings"}}]}}`)}
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Lookup(context.Background(), obj); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
