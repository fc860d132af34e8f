// Command testcluster brings up a local Kubernetes control plane (embedded etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok with fake nodes) whose audit webhook feeds a
// Kelemetry all-in-one built from this repository, prints how to use them, and tears everything
// down on Ctrl-C. Build the binaries first (go run ./cmd/buildbins), then, in e2e/:
//
//	go run ./cmd/testcluster
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultBins, err := bins.Dir()
	if err != nil {
		return err
	}
	var (
		binDir   = flag.String("bin-dir", defaultBins, "folder of the binaries built by ./cmd/buildbins")
		workDir  = flag.String("work-dir", "", "folder for the cluster's files, kept after exit (default: a temporary folder, removed on exit)")
		name     = flag.String("cluster", "test", "cluster name in Kelemetry")
		nodes    = flag.Int("nodes", 3, "number of fake nodes")
		httpPort = flag.Int("http-port", 16686, "Kelemetry API port on 127.0.0.1 (0: any free port)")
		window   = flag.Duration("window", 0, "Kelemetry trace window (default: the all-in-one's 30m)")
		policy   = flag.String("audit-policy", "", "kube-apiserver audit policy (default: ../deploy/audit-policy.yaml when present)")
		verbose  = flag.Bool("v", false, "debug logs")
	)
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *policy == "" {
		if _, err := os.Stat(filepath.Join("..", "deploy", "audit-policy.yaml")); err == nil {
			*policy, _ = filepath.Abs(filepath.Join("..", "deploy", "audit-policy.yaml"))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	env, err := cluster.StartEnv(ctx, cluster.EnvOptions{
		BinDir:          *binDir,
		ClusterName:     *name,
		AuditPolicyFile: *policy,
		Nodes:           *nodes,
		Window:          *window,
		WorkDir:         *workDir,
		KeepWorkDir:     *workDir != "",
		HTTPPort:        *httpPort,
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	defer func() {
		logger.Info("stopping")
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.Stop(sctx); err != nil {
			logger.Error("stop", "err", err)
		}
	}()
	kubectl := filepath.Join(*binDir, bins.Kubectl)
	kc := env.Cluster.Kubeconfig
	k := env.Kelemetry.URL
	fmt.Printf(`
Test cluster ready in %s.

  kubeconfig:      %s
  API server:      %s
  Kelemetry API:   %s
  audit log:       %s
  component logs:  %s

Try:
  export KUBECONFIG=%s
  alias kubectl=%s
  kubectl get nodes
  kubectl create deployment demo --image=nginx --replicas=2
  kubectl scale deployment demo --replicas=4
  curl -s '%s/api/objects?resource=deployments&name=demo' | jq
  curl -s "%s/api/stored-traces/$(curl -s '%s/api/objects?resource=deployments&name=demo' | jq -r '.objects[0].windows[0].traceID')" | jq '.data[0].spans[].operationName'

Ctrl-C stops everything.
`, time.Since(start).Round(100*time.Millisecond), kc, env.Cluster.Server, k, env.Cluster.AuditLog,
		filepath.Dir(kc), kc, kubectl, k, k, k)

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := env.Healthy(); err != nil {
				return err
			}
		}
	}
}
