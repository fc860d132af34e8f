package kelemetry_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/telemetry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// ingest runs events through the consumer, the aggregator and the built-in linkers (with event
// bodies only, as without a kubeconfig) into a recording sink.
func ingest(t *testing.T, events []*auditv1.Event) []*aggregator.Span {
	t.Helper()
	sink := &aggregatortest.RecordingSink{}
	require.NoError(t, audittest.Replay(context.Background(), audittest.Config{
		Cluster: "golden",
		Deps: aggregator.Deps{
			Sinks: []aggregator.Sink{sink},
			Linkers: []aggregator.Linker{
				linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
				linker.NewAnnotationLinker(nil, telemetry.Settings{}),
			},
		},
	}, events))
	return sink.Spans()
}

// TestGoldenTraces replays the recorded scenarios in their recorded order and in shuffled orders:
// the object trees must not depend on the order events arrive in.
func TestGoldenTraces(t *testing.T) {
	for _, scenario := range []string{"rollout", "cronjob", "annotations"} {
		t.Run(scenario, func(t *testing.T) {
			events, err := audittest.ReadFile(filepath.Join("testdata", scenario, "audit.jsonl"))
			require.NoError(t, err)
			got := aggregatortest.RenderTrees(ingest(t, events))
			golden := filepath.Join("testdata", "golden", scenario+".txt")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -run TestGoldenTraces -update to create it")
			require.Equal(t, string(want), got)

			for seed := uint64(1); seed <= 3; seed++ {
				shuffled := append([]*auditv1.Event(nil), events...)
				rng := rand.New(rand.NewPCG(seed, seed))
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				assert.Equal(t, string(want), aggregatortest.RenderTrees(ingest(t, shuffled)), fmt.Sprintf("shuffle seed %d", seed))
			}
		})
	}
}
