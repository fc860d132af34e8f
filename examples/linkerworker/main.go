// Command linkerworker serves a custom linker in its own process: Kelemetry sends it link jobs
// over NATS and gets the links back, so the linker is deployed, scaled and updated like any
// controller, without rebuilding Kelemetry's image. Start as many replicas as needed: they share
// the jobs (a NATS queue group).
//
// The linker here, VolumesLinker, puts under each Pod the ConfigMaps, Secrets and
// PersistentVolumeClaims it mounts (class "volumes"), so a ConfigMap's trace lists the Pods that
// read it and a Pod's tree shows the objects its volumes came from.
//
//	go run ./examples/linkerworker --nats-url nats://127.0.0.1:4222
//	go run ./cmd/kelemetry --remote-linker volumes --remote-linker-nats-url nats://127.0.0.1:4222
//
// Everything but VolumesLinker is the SDK: remotelinker.Serve and natsqueue.Dial.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/remotelinker"
	"github.com/kelemetry/kelemetry/telemetry"
)

// VolumesLinker links a Pod to the ConfigMaps, Secrets and PersistentVolumeClaims its volumes
// mount (directly or through a projected volume), as children of class "volumes".
type VolumesLinker struct{}

// Name implements aggregator.Linker; Kelemetry's --remote-linker names the same.
func (VolumesLinker) Name() string { return "volumes" }

// podVolumes is the part of a Pod the linker reads.
type podVolumes struct {
	Spec struct {
		Volumes []struct {
			ConfigMap *struct {
				Name string `json:"name"`
			} `json:"configMap"`
			Secret *struct {
				SecretName string `json:"secretName"`
			} `json:"secret"`
			PersistentVolumeClaim *struct {
				ClaimName string `json:"claimName"`
			} `json:"persistentVolumeClaim"`
			Projected *struct {
				Sources []struct {
					ConfigMap *struct {
						Name string `json:"name"`
					} `json:"configMap"`
					Secret *struct {
						Name string `json:"name"`
					} `json:"secret"`
				} `json:"sources"`
			} `json:"projected"`
		} `json:"volumes"`
	} `json:"spec"`
}

// Lookup implements aggregator.Linker. It reads the body the event carried (a Pod's create
// response has its volumes); without a body it finds nothing.
func (VolumesLinker) Lookup(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	if obj.Group != "" || obj.Resource != "pods" || len(obj.Body) == 0 {
		return nil, nil
	}
	var pod podVolumes
	if err := json.Unmarshal(obj.Body, &pod); err != nil {
		return nil, fmt.Errorf("decode pod %s: %w", obj.String(), err)
	}
	seen := map[[2]string]bool{}
	var links []aggregator.Link
	add := func(resource, name string) {
		k := [2]string{resource, name}
		if name == "" || seen[k] {
			return
		}
		seen[k] = true
		links = append(links, aggregator.Link{
			Target: aggregator.ObjectRef{Cluster: obj.Cluster, Version: "v1", Resource: resource, Namespace: obj.Namespace, Name: name},
			Role:   aggregator.RoleChild,
			Class:  "volumes",
		})
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			add("configmaps", v.ConfigMap.Name)
		case v.Secret != nil:
			add("secrets", v.Secret.SecretName)
		case v.PersistentVolumeClaim != nil:
			add("persistentvolumeclaims", v.PersistentVolumeClaim.ClaimName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add("configmaps", s.ConfigMap.Name)
				}
				if s.Secret != nil {
					add("secrets", s.Secret.Name)
				}
			}
		}
	}
	return links, nil
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "linkerworker:", err)
		os.Exit(1)
	}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	nats        natsqueue.Conn
	worker      remotelinker.WorkerConfig
	metricsAddr string
	drain       time.Duration
	level       slog.Level
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("linkerworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        options
		urls     stringList
		logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	)
	fs.Var(&urls, "nats-url", "NATS server (nats://host:4222, tls://host:4222); repeatable")
	fs.StringVar(&o.nats.CredentialsFile, "nats-creds", "", "NATS credentials file (user JWT and NKey seed)")
	fs.StringVar(&o.nats.NKeySeedFile, "nats-nkey", "", "file of an NKey seed to authenticate to NATS")
	fs.StringVar(&o.nats.TLS.CAFile, "nats-tls-ca", "", "PEM CA bundle that verifies the NATS servers")
	fs.StringVar(&o.nats.TLS.CertFile, "nats-tls-cert", "", "PEM client certificate for NATS")
	fs.StringVar(&o.nats.TLS.KeyFile, "nats-tls-key", "", "PEM key of --nats-tls-cert")
	fs.StringVar(&o.worker.Subject, "subject", "", "subject of the link jobs (default kelemetry.link.volumes; Kelemetry's --remote-linker volumes=SUBJECT)")
	fs.StringVar(&o.worker.Queue, "queue", "", "queue group the replicas share (default kelemetry-linkers)")
	fs.IntVar(&o.worker.Concurrency, "concurrency", 0, "jobs run at once; more are answered busy (default 16)")
	fs.DurationVar(&o.worker.Timeout, "timeout", 0, "bound of one lookup (default 5s)")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics on this HOST:PORT (off when empty)")
	fs.DurationVar(&o.drain, "drain-timeout", 10*time.Second, "on SIGTERM, how long to finish the jobs received")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, u := range urls {
		o.nats.URLs = append(o.nats.URLs, strings.Split(u, ",")...)
	}
	o.nats.Name = "kelemetry-linkerworker"
	if err := o.level.UnmarshalText([]byte(*logLevel)); err != nil {
		return o, fmt.Errorf("--log-level: %w", err)
	}
	if err := o.nats.Validate(); err != nil {
		return o, fmt.Errorf("nats: %w", err)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.level}))
	tel := telemetry.Settings{Logger: logger}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if o.metricsAddr != "" {
		prom, err := telemetry.NewPrometheus()
		if err != nil {
			return err
		}
		defer func() { _ = prom.Shutdown(context.Background()) }()
		tel.MeterProvider = prom.Provider
		l, err := net.Listen("tcp", o.metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", prom.Handler)
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		defer func() { _ = srv.Close() }()
	}

	nc, err := natsqueue.Dial(o.nats, logger)
	if err != nil {
		return err
	}
	defer nc.Close()
	logger.Info("serving linker", "linker", VolumesLinker{}.Name(), "nats", nc.ConnectedUrlRedacted())
	return remotelinker.Serve(ctx, nc, VolumesLinker{}, o.worker, tel, o.drain)
}
