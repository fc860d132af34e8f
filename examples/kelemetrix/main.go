// Command kelemetrix computes metrics from the audit stream without traces: the audit webhook
// (POST /audit, /audit/{cluster}), replay and follow of audit log files, and /metrics with the
// metrics defined by --kelemetrix-config (deploy/kelemetrix.yaml is a default). No store, no
// aggregator: every decoded audit event, reads included, goes to the kelemetrix processor.
//
//	go run ./examples/kelemetrix --kelemetrix-config deploy/kelemetrix.yaml --replay testdata/rollout/audit.jsonl
//
// Then: curl localhost:16686/metrics. kube-apiserver needs an audit policy that keeps reads
// (deploy/audit-policy-kelemetrix.yaml) and the webhook kubeconfig pointing at --audit-addr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/webhook"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/kelemetrix"
	"github.com/kelemetry/kelemetry/telemetry"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kelemetrix:", err)
		os.Exit(1)
	}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// config is what the flags say.
type config struct {
	cluster   string
	auditAddr string
	httpAddr  string
	metrics   kelemetrix.Config
	replay    []string
	follow    []string
	level     slog.Level
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("kelemetrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	var replay, follow stringList
	fs.StringVar(&c.cluster, "cluster", "default", "cluster name for POST /audit and log files")
	fs.StringVar(&c.auditAddr, "audit-addr", httpserver.DefaultAuditAddr, "listen address of the audit webhook (POST /audit, /audit/{cluster})")
	fs.StringVar(&c.httpAddr, "http-addr", httpserver.DefaultAPIAddr, "listen address of /metrics and /healthz")
	file := fs.String("kelemetrix-config", "", "metrics definitions (YAML, e.g. deploy/kelemetrix.yaml); required")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Var(&replay, "replay", "audit log file (JSON lines, .gz ok) to turn into metrics at start-up; repeatable")
	fs.Var(&follow, "follow", "audit log file to follow like tail -F; repeatable")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.level.UnmarshalText([]byte(*logLevel)); err != nil {
		return config{}, fmt.Errorf("--log-level: %w", err)
	}
	if *file == "" {
		return config{}, errors.New("--kelemetrix-config is required (deploy/kelemetrix.yaml is a default)")
	}
	var err error
	if c.metrics, err = kelemetrix.LoadConfig(*file); err != nil {
		return config{}, fmt.Errorf("--kelemetrix-config: %w", err)
	}
	c.replay, c.follow = replay, follow
	return c, nil
}

// pipeline is what newPipeline provides.
type pipeline struct {
	fx.Out

	Processor *kelemetrix.Processor
	Replayer  *auditlog.Replayer
	Webhook   httpserver.Handler `group:"kelemetry.http.audit"`
}

// newPipeline builds the processor and its sources: the webhook, replay and follow enqueue into
// the processor directly (it is their queue.EventQueue).
func newPipeline(c config, ts telemetry.Settings, lc fx.Lifecycle) (pipeline, error) {
	proc, err := kelemetrix.New(c.metrics, ts)
	if err != nil {
		return pipeline{}, err
	}
	// Appended first, stopped last: the sources stop feeding it before it drains.
	lc.Append(fx.StartStopHook(proc.Start, proc.Stop))
	webhook := webhook.New(webhook.Config{DefaultCluster: c.cluster}, webhook.Deps{Queue: proc, Telemetry: ts})
	for _, f := range c.follow {
		fl, err := auditlog.NewFollower(auditlog.FollowConfig{Path: f, Cluster: c.cluster}, proc, ts)
		if err != nil {
			return pipeline{}, fmt.Errorf("follow %s: %w", f, err)
		}
		lc.Append(fx.StartStopHook(fl.Start, fl.Stop))
	}
	replayer := auditlog.NewReplayer(c.replay, c.cluster, 0, proc, ts)
	lc.Append(fx.StartStopHook(replayer.Start, replayer.Stop))
	return pipeline{Processor: proc, Replayer: replayer, Webhook: webhook}, nil
}

// options is the whole binary.
func options(c config, logger *slog.Logger) fx.Option {
	return fx.Options(
		telemetry.Module,  // the Prometheus provider and GET /metrics
		httpserver.Module, // the audit listener (webhook) and the API listener (/metrics, /healthz)
		fx.Supply(c, logger, httpserver.Config{AuditAddr: c.auditAddr, APIAddr: c.httpAddr}),
		fx.Provide(newPipeline,
			// The provider keeps every series of the metrics (maxSeries above the SDK's 2000).
			fx.Annotate(func(c config) telemetry.CardinalityLimit { return c.metrics.CardinalityLimit() },
				fx.ResultTags(telemetry.CardinalityGroup))),
		fx.Invoke(func(*kelemetrix.Processor, *auditlog.Replayer) {}),
		fx.NopLogger,
	)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.level}))
	app := fx.New(options(c, logger))
	if err := app.Err(); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-sigCtx.Done()
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	return app.Stop(stopCtx)
}
