package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
)

// StartEnvT starts an Env for one test (or benchmark) and stops it in tb.Cleanup, so that a
// failing test leaves nothing running. It skips the test when the binaries are missing.
func StartEnvT(tb testing.TB, opts EnvOptions) *Env {
	tb.Helper()
	if opts.BinDir == "" {
		dir, err := bins.Dir()
		if err != nil {
			tb.Fatal(err)
		}
		opts.BinDir = dir
	}
	if missing := bins.Missing(opts.BinDir); len(missing) > 0 {
		tb.Skipf("%s missing in %s: build them with `go run ./cmd/buildbins` in e2e/", strings.Join(missing, ", "), opts.BinDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := StartEnv(ctx, opts)
	if err != nil {
		tb.Fatalf("start the test environment: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.Stop(ctx); err != nil {
			tb.Errorf("stop the test environment: %v", err)
		}
	})
	return env
}
