package jaegerproc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
)

// StartT starts Jaeger for one test, its files in a fresh tb.TempDir() unless opts.Dir is set,
// and stops it in tb.Cleanup, showing the tail of its log when the test failed. It skips the
// test when the binary is missing (build it with `go run ./cmd/buildbins` in e2e/), unless
// $KELEMETRY_E2E_REQUIRE is 1.
func StartT(tb testing.TB, opts Options) *Jaeger {
	tb.Helper()
	if opts.Bin == "" {
		dir, err := bins.Dir()
		if err != nil {
			tb.Fatal(err)
		}
		opts.Bin = filepath.Join(dir, bins.Jaeger)
	}
	if st, err := os.Stat(opts.Bin); err != nil || st.Mode()&0o111 == 0 {
		if os.Getenv("KELEMETRY_E2E_REQUIRE") == "1" {
			tb.Fatalf("%s missing: build it with `go run ./cmd/buildbins` in e2e/", opts.Bin)
		}
		tb.Skipf("%s missing: build it with `go run ./cmd/buildbins` in e2e/", opts.Bin)
	}
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := Start(ctx, opts)
	if err != nil {
		tb.Fatalf("start jaeger (%s): %v", opts.Mode, err)
	}
	tb.Cleanup(func() {
		if err := j.Stop(); err != nil {
			tb.Errorf("stop jaeger: %v", err)
		}
		if tb.Failed() {
			tb.Logf("jaeger (%s) log %s, last lines:\n%s", opts.Mode, j.LogFile, j.LogTail(8000))
		}
	})
	return j
}
