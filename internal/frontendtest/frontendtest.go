// Package frontendtest holds the fixtures the query tests share: recorded audit logs replayed
// through the real pipeline (with the built-in linkers that need no cluster, Linkers) into a
// memory store (replayAuditLog), and the bundled rollout replayed once per test binary
// (Rollout) with its time range.
package frontendtest

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The bundled rollout fixture (testdata/rollout) was recorded between 17:00 and 17:11 UTC; a
// range from RolloutFrom to RolloutTo covers it.
var (
	RolloutFrom = time.Date(2026, 11, 29, 16, 30, 0, 0, time.UTC)
	RolloutTo   = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
)

// Linkers are the built-in linkers that need no cluster: owner references and the parent-link
// annotation, read from the audit bodies.
func Linkers() []aggregator.Linker {
	return []aggregator.Linker{
		linker.NewOwnerLinker(kube.NewStaticMapper(), nil, telemetry.Settings{}),
		linker.NewAnnotationLinker(nil, telemetry.Settings{}),
	}
}

// replayAuditLog replays an audit log file (JSON lines) through the audit consumer and the
// aggregator with Linkers into a new memory store, as cluster audittest.DefaultCluster.
func replayAuditLog(ctx context.Context, path string) (*memory.Store, error) {
	st := memory.New(memory.Config{}, 0)
	err := audittest.ReplayFile(ctx, audittest.Config{
		Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}, Linkers: Linkers()},
	}, path)
	return st, err
}

// RolloutAuditLog is the path of the bundled rollout's audit log (testdata/rollout/audit.jsonl).
func RolloutAuditLog() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "rollout", "audit.jsonl")
}

var (
	rolloutOnce  sync.Once
	rolloutStore *memory.Store
	rolloutErr   error
)

// FreshRollout is the bundled rollout replayed into a store of the caller's own, which it may
// write to.
func FreshRollout(t testing.TB) *memory.Store {
	t.Helper()
	st, err := replayAuditLog(context.Background(), RolloutAuditLog())
	require.NoError(t, err)
	return st
}

// Rollout is the bundled rollout replayed with replayAuditLog, once per test binary: callers
// share the store and must not write to it.
func Rollout(t testing.TB) *memory.Store {
	t.Helper()
	rolloutOnce.Do(func() {
		rolloutStore, rolloutErr = replayAuditLog(context.Background(), RolloutAuditLog())
	})
	require.NoError(t, rolloutErr)
	return rolloutStore
}
