// Command record runs a named scenario against a fresh test cluster (embedded etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok, and a Kelemetry all-in-one fed by
// the audit webhook) and writes what the control plane produced as golden fixtures: audit.jsonl,
// webhook-batches.jsonl, events-core-v1.json, events-events-v1.json and commands.log (see package
// record). Build the binaries first (go run ./cmd/buildbins), then, in e2e/:
//
//	go run ./cmd/record -scenario rollout -out ../testdata/recorded/rollout
//	go run ./cmd/record -list
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
	"github.com/kelemetry/kelemetry/e2e/record"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultBins, err := bins.Dir()
	if err != nil {
		return err
	}
	var (
		name      = flag.String("scenario", "", "scenario to run (see -list)")
		out       = flag.String("out", "", "output folder (default ../testdata/recorded/<scenario>)")
		namespace = flag.String("namespace", "", "the scenario's namespace (default: the scenario's name)")
		binDir    = flag.String("bin-dir", defaultBins, "folder of the binaries built by ./cmd/buildbins")
		policy    = flag.String("audit-policy", "", "kube-apiserver audit policy (default: ../deploy/audit-policy.yaml when present)")
		settle    = flag.Duration("settle", record.DefaultSettle, "wait after the scenario before listing Events and closing the recorded span")
		workDir   = flag.String("work-dir", "", "folder for the cluster's files, kept after exit (default: a temporary folder, removed unless the recording fails)")
		list      = flag.Bool("list", false, "list the scenarios and exit")
		verbose   = flag.Bool("v", false, "debug logs")
	)
	flag.Parse()
	if *list {
		for _, sc := range scenario.All() {
			fmt.Printf("%-12s %s\n", sc.Name, sc.Description)
		}
		return nil
	}
	if *name == "" {
		flag.Usage()
		return fmt.Errorf("-scenario is required (one of %v)", scenario.Names())
	}
	if *out == "" {
		*out = filepath.Join("..", "testdata", "recorded", *name)
	}
	if *policy == "" {
		if _, err := os.Stat(filepath.Join("..", "deploy", "audit-policy.yaml")); err == nil {
			*policy, _ = filepath.Abs(filepath.Join("..", "deploy", "audit-policy.yaml"))
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := record.Run(ctx, record.Options{
		Scenario:        *name,
		OutDir:          *out,
		Namespace:       *namespace,
		BinDir:          *binDir,
		AuditPolicyFile: *policy,
		Settle:          *settle,
		WorkDir:         *workDir,
		KeepWorkDir:     *workDir != "",
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	fmt.Printf("recorded scenario %s into %s in %s: %d audit events, %d webhook batches (of %d received), %d core/v1 and %d events.k8s.io/v1 Events, %d steps\n",
		*name, *out, time.Since(start).Round(100*time.Millisecond), res.AuditEvents, res.WebhookBatches, res.WebhookRequests,
		res.CoreEvents, res.EventsV1, res.Steps)
	return nil
}
