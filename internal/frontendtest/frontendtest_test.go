package frontendtest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReplayAuditLogLinksTheRollout(t *testing.T) {
	ctx := context.Background()
	st, err := frontendtest.ReplayAuditLog(ctx, filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl"))
	require.NoError(t, err)
	objs, err := st.FindObjects(ctx, store.ObjectQuery{Resource: "deployments", Name: "demo",
		From: frontendtest.RolloutFrom, To: frontendtest.RolloutTo})
	require.NoError(t, err)
	require.Len(t, objs, 1, "the rollout's Deployment")
	spans, err := st.GetTrace(ctx, objs[0].Windows[0].TraceID)
	require.NoError(t, err)
	links := 0
	for _, sp := range spans {
		if sp.Kind == "link" {
			links++
		}
	}
	require.Positive(t, links, "the owner linker linked it to its ReplicaSets")
}
