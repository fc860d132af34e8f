// Command allinone is the shortest complete Kelemetry binary on the public API: every part
// (kelemetry.Module, through kelemetry.Modules) on a configuration file, logging through slog.
// The product binary, cmd/kelemetry, adds the command line (subcommands, flags, --set, validate)
// to the same modules; start from this one to compose your own.
//
//	go run ./examples/allinone --config deploy/allinone.yaml
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/telemetry"
)

func main() {
	configFile := flag.String("config", "", "YAML configuration file (deploy/allinone.yaml); none: the defaults, traces in ./kelemetry-data")
	flag.Parse()

	cfg := kelemetry.Config{DataDir: "./kelemetry-data"}
	if *configFile != "" {
		var err error
		if cfg, err = kelemetry.LoadConfig(*configFile); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	telemetry.RouteKlog(logger)
	if _, err := cfg.ApplyMemoryLimit(logger); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Run starts every part, waits for SIGINT or SIGTERM, then drains the audit queue and flushes
	// the sinks.
	fx.New(
		kelemetry.Modules(cfg.Role),
		fx.Supply(cfg, logger),
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: logger}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
	).Run()
}
