// Command buildbins builds the binaries the end-to-end tests need into the cache folder
// ($KELEMETRY_E2E_CACHE, default $HOME/.cache/kelemetry-e2e/bin): kube-apiserver,
// kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes, kwok, Jaeger v2
// (tools/jaeger), this repository's cmd/kelemetry, and nats-server (pinned by the repository's
// go.mod). The control plane and Jaeger are reused when already built for the same versions (a
// cold build takes 20-35 and about 13 minutes on 2 cores); the all-in-one and nats-server are
// always rebuilt (seconds from the Go build cache). Run it from the e2e folder:
//
//	go run ./cmd/buildbins
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "buildbins:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultCache, err := bins.Dir()
	if err != nil {
		return err
	}
	var (
		cacheDir = flag.String("cache", defaultCache, "folder receiving the binaries (default: $"+bins.EnvCache+" or ~/.cache/kelemetry-e2e/bin)")
		e2eDir   = flag.String("e2e-dir", "", "the e2e module folder (default: found from the working directory)")
		force    = flag.Bool("force", false, "rebuild the control plane and Jaeger even when the cache is up to date")
	)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *e2eDir == "" {
		if *e2eDir, err = findE2EDir(); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := bins.Build(ctx, bins.BuildOptions{E2EDir: *e2eDir, CacheDir: *cacheDir, Force: *force, Logger: logger})
	if err != nil {
		return err
	}
	logger.Info("binaries ready", "dir", *cacheDir, "took", time.Since(start).Round(time.Second),
		"controlPlaneCached", rep.ControlPlaneCached, "controlPlane", rep.ControlPlane.Round(time.Second),
		"kwok", rep.Kwok.Round(time.Second), "tools", rep.Tools, "allinone", rep.AllInOne.Round(time.Second),
		"natsServer", rep.NATSServer.Round(time.Second))
	return nil
}

// findE2EDir walks up from the working directory to the folder holding the e2e module's go.mod.
func findE2EDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		for _, cand := range []string{dir, filepath.Join(dir, "e2e")} {
			data, err := os.ReadFile(filepath.Join(cand, "go.mod"))
			if err == nil && bytesHasModule(data, "github.com/kelemetry/kelemetry/e2e") {
				return cand, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("e2e module not found from the working directory; pass -e2e-dir")
		}
		dir = parent
	}
}

func bytesHasModule(gomod []byte, module string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if strings.TrimSpace(line) == "module "+module {
			return true
		}
	}
	return false
}
