// Command customlinker shows how a platform team adds its own relation to Kelemetry: a linker
// that puts every Pod under the ServiceAccount it runs as, so a ServiceAccount's trace lists the
// Pods that used its identity. Everything else is the built-in application.
//
//	go run ./examples/customlinker --replay testdata/rollout/audit.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
)

// ServiceAccountLinker links a Pod to the ServiceAccount in its spec.serviceAccountName.
type ServiceAccountLinker struct{}

// NewServiceAccountLinker is the constructor handed to fx.
func NewServiceAccountLinker() *ServiceAccountLinker { return &ServiceAccountLinker{} }

// Name implements aggregator.Linker.
func (*ServiceAccountLinker) Name() string { return "serviceaccount" }

// Lookup implements aggregator.Linker. It reads the body the event carried (the create response
// already has the admission-defaulted service account); without a body it finds nothing. A
// linker that must see every object would fetch it, as the built-in owner linker does with
// --kubeconfig.
func (*ServiceAccountLinker) Lookup(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	if obj.Group != "" || obj.Resource != "pods" || obj.Body == nil {
		return nil, nil
	}
	var pod struct {
		Spec struct {
			ServiceAccountName string `json:"serviceAccountName"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(obj.Body, &pod); err != nil {
		return nil, fmt.Errorf("decode pod %s: %w", obj.String(), err)
	}
	if pod.Spec.ServiceAccountName == "" {
		return nil, nil
	}
	return []aggregator.Link{{
		Target: aggregator.ObjectRef{Cluster: obj.Cluster, Version: "v1", Resource: "serviceaccounts",
			Namespace: obj.Namespace, Name: pod.Spec.ServiceAccountName},
		Role:  aggregator.RoleParent,
		Class: "pods",
	}}, nil
}

// options is the whole binary: the built-in application plus one linker.
func options(cfg kelemetry.Config, logger *slog.Logger) fx.Option {
	return fx.Options(
		kelemetry.Module,
		fx.Supply(cfg, logger),
		fx.Provide(aggregator.AsLinker(NewServiceAccountLinker)),
		fx.NopLogger,
	)
}

func main() {
	replay := flag.String("replay", "", "audit log file to ingest at start-up")
	dataDir := flag.String("data-dir", "", `embedded store directory ("" = in memory)`)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := kelemetry.Config{DataDir: *dataDir}
	if *replay != "" {
		cfg.Audit.Replay = []string{*replay}
	}
	app := fx.New(options(cfg, logger))
	if err := app.Start(context.Background()); err != nil {
		logger.Error("start", "error", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	if err := app.Stop(context.Background()); err != nil {
		logger.Error("stop", "error", err)
		os.Exit(1)
	}
}
