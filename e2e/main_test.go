package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// Environment variables of the end-to-end tests.
const (
	// envRequire=1 makes missing binaries a failure instead of a skip (scripts/e2e.sh sets it).
	envRequire = "KELEMETRY_E2E_REQUIRE"
	// envKeep=1 keeps the work folder (logs, audit log, store) even when every test passes.
	envKeep = "KELEMETRY_E2E_KEEP"
)

// clusterName is the all-in-one's name for the test cluster.
const clusterName = "test"

// The environment shared by every scenario (set up once by TestMain; each scenario uses its own
// namespace).
var (
	env        *cluster.Env
	api        *kapi.Client
	kube       kubernetes.Interface
	kubectl    string // the kubectl binary
	plugin     string // the kubectl-kelemetry binary
	skipReason string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if testing.Short() {
		skipReason = "end-to-end tests skipped in -short mode"
		return m.Run()
	}
	binDir, err := bins.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if missing := bins.Missing(binDir); len(missing) > 0 {
		skipReason = fmt.Sprintf("end-to-end tests skipped: %s missing in %s; build them with `go run ./cmd/buildbins` in e2e/ (or run scripts/e2e.sh)",
			strings.Join(missing, ", "), binDir)
		if os.Getenv(envRequire) == "1" {
			fmt.Fprintln(os.Stderr, "e2e:", skipReason)
			return 1
		}
		return m.Run()
	}

	policy, err := filepath.Abs(filepath.Join("..", "deploy", "audit-policy.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	var kelemetrixArgs []string
	for _, f := range kelemetrixConfigs {
		abs, err := filepath.Abs(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		kelemetrixArgs = append(kelemetrixArgs, "--kelemetrix-config="+abs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	env, err = cluster.StartEnv(ctx, cluster.EnvOptions{
		BinDir:          binDir,
		ClusterName:     clusterName,
		AuditPolicyFile: policy, // the policy this repository ships
		AllInOneArgs:    kelemetrixArgs,
		KeepWorkDir:     true, // removed below when every test passed
		Logger:          logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start the test cluster:", err)
		return 1
	}
	logger.Info("e2e environment ready", "took", time.Since(start).Round(time.Millisecond),
		"kelemetry", env.Kelemetry.URL, "kubeconfig", env.Cluster.Kubeconfig, "workDir", env.WorkDir)
	api = kapi.New(env.Kelemetry.URL)
	kube = env.Cluster.Client
	kubectl = filepath.Join(binDir, bins.Kubectl)
	plugin = filepath.Join(binDir, bins.KubectlPlugin)

	// Ctrl-C or a SIGTERM while the tests run: stop the cluster before dying.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		logger.Warn("interrupted, stopping the test cluster", "signal", sig.String())
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		_ = env.Stop(sctx)
		os.RemoveAll(env.WorkDir)
		os.Exit(1)
	}()

	code := m.Run()
	signal.Stop(sigs)

	stopStart := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	if err := env.Stop(sctx); err != nil {
		logger.Error("stop the test cluster", "err", err)
		code = 1
	}
	logger.Info("e2e environment stopped", "took", time.Since(stopStart).Round(time.Millisecond))
	if code == 0 && os.Getenv(envKeep) != "1" {
		os.RemoveAll(env.WorkDir)
	} else {
		logger.Info("kept the work folder: component logs, audit.log, kelemetry.log, the store", "dir", env.WorkDir)
	}
	return code
}

// needEnv skips the test when the environment could not be set up for lack of binaries.
func needEnv(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if err := env.Healthy(); err != nil {
		t.Fatalf("test environment unhealthy: %v", err)
	}
}
