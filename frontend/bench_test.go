package frontend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// BenchmarkDeployment1000Pods is the target: find, follow, merge and draw (tracing, full
// tree) a Deployment with one ReplicaSet and 1,000 Pods over 4 windows, from the Pebble store.
func BenchmarkDeployment1000Pods(b *testing.B) {
	ctx := context.Background()
	st, err := store.OpenPebble(ctx, store.PebbleConfig{Dir: b.TempDir()}, 0, telemetry.Settings{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })

	dep, rs := obj("deployments", "web"), obj("replicasets", "web-1")
	for i := range 4 {
		window := w0.Add(time.Duration(i) * win)
		var w world
		w.event(dep, window.Add(time.Minute), fmt.Sprintf("d%d", i))
		w.event(rs, window.Add(time.Minute), fmt.Sprintf("r%d", i))
		w.link(dep, rs, window, "children")
		for p := range 1000 {
			pod := obj("pods", fmt.Sprintf("web-1-%04d", p))
			w.link(rs, pod, window, "children")
			w.event(pod, window.Add(2*time.Minute), fmt.Sprintf("a%d", i))
			w.event(pod, window.Add(3*time.Minute), fmt.Sprintf("b%d", i))
		}
		require.NoError(b, st.Export(ctx, w.spans))
	}
	engine := frontend.NewEngine(st, 0, frontend.EngineConfig{PerLevel: 2000, Total: 2000})
	q := frontend.Query{Resource: "deployments", Name: "web", From: w0, To: w0.Add(4*win - 1)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		gs, err := engine.Search(ctx, q, frontend.LinkFullTree)
		if err != nil || len(gs) != 1 || len(gs[0].Objects) != 1002 {
			b.Fatalf("search: %v %d", err, len(gs))
		}
		tr := frontend.Render(gs[0], frontend.DisplayTracing, aggregator.TraceIDFor(dep.Key(), w0))
		if len(tr.Spans) != 1002 {
			b.Fatalf("%d spans", len(tr.Spans))
		}
	}
}
