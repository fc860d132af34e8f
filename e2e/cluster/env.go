package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// EnvOptions configure StartEnv.
type EnvOptions struct {
	// BinDir holds the binaries; default bins.Dir().
	BinDir string
	// ClusterName is the all-in-one's cluster name (default "test").
	ClusterName string
	// AuditPolicyFile is kube-apiserver's audit policy; default DefaultAuditPolicy.
	AuditPolicyFile string
	// Nodes is the number of fake nodes (default 3).
	Nodes int
	// Window is the all-in-one's --window (default: its own, 30m).
	Window time.Duration
	// WorkDir holds the cluster's and the all-in-one's files; default: a new temporary folder.
	WorkDir string
	// KeepWorkDir keeps WorkDir after Stop.
	KeepWorkDir bool
	// HTTPPort is the all-in-one's API port (0: a free one).
	HTTPPort int
	// AuditWebhookVia, when set, is called with the all-in-one's audit webhook URL before
	// anything starts and returns the URL kube-apiserver posts its batches to instead: the
	// address of a proxy in front of the all-in-one (the recorder's). The caller owns the proxy
	// and must keep it serving until Stop returned (kube-apiserver flushes its last batches when
	// it stops). The proxy speaks plain HTTP, so the webhook does too; without a proxy,
	// kube-apiserver posts over TLS with a client certificate, which the all-in-one requires.
	AuditWebhookVia func(allInOneURL string) (string, error)
	// APIServerArgs are appended to kube-apiserver's command line.
	APIServerArgs []string
	// AllInOneArgs are appended to the all-in-one's command line (e.g. --kelemetrix-config=FILE).
	AllInOneArgs []string
	Logger       *slog.Logger
}

// Env is a test cluster whose kube-apiserver sends its audit batches to a Kelemetry all-in-one,
// which in turn reads the cluster with an admin kubeconfig.
type Env struct {
	Cluster   *Cluster
	Kelemetry *AllInOne
	// WorkDir holds everything: cluster/ (certificates, kubeconfigs, audit.log, component
	// logs), kelemetry-data/ and kelemetry.log.
	WorkDir string
	keep    bool
}

// StartEnv starts a Kelemetry all-in-one and a test cluster wired to it.
func StartEnv(ctx context.Context, opts EnvOptions) (_ *Env, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ClusterName == "" {
		opts.ClusterName = "test"
	}
	env := &Env{WorkDir: opts.WorkDir, keep: opts.KeepWorkDir}
	if env.WorkDir == "" {
		if env.WorkDir, err = os.MkdirTemp("", "kelemetry-e2e-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(env.WorkDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = env.Stop(context.Background())
		}
	}()
	aio := AllInOneOptions{
		BinDir:    opts.BinDir,
		Cluster:   opts.ClusterName,
		DataDir:   filepath.Join(env.WorkDir, "kelemetry-data"),
		Window:    opts.Window,
		LogFile:   filepath.Join(env.WorkDir, "kelemetry.log"),
		HTTPPort:  opts.HTTPPort,
		ExtraArgs: opts.AllInOneArgs,
		Logger:    opts.Logger,
	}
	var webhookCA, clientCert, clientKey string
	if opts.AuditWebhookVia == nil {
		// kube-apiserver -> Kelemetry over TLS, authenticated with a client certificate, the
		// secure setup of deploy/: every scenario exercises it.
		dir := filepath.Join(env.WorkDir, "webhook-tls")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := writeWebhookCerts(dir)
		if err != nil {
			return nil, fmt.Errorf("webhook certificates: %w", err)
		}
		aio.AuditTLS = &WebhookTLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, ClientCAFile: f.CA}
		webhookCA, clientCert, clientKey = f.CA, f.ClientCert, f.ClientKey
	}
	auditURL, err := PlanAllInOne(&aio)
	if err != nil {
		return nil, err
	}
	if opts.AuditWebhookVia != nil {
		if auditURL, err = opts.AuditWebhookVia(auditURL); err != nil {
			return nil, fmt.Errorf("audit webhook proxy: %w", err)
		}
	}
	env.Cluster, err = Start(ctx, Options{
		BinDir:                 opts.BinDir,
		AuditWebhookURL:        auditURL,
		AuditWebhookCAFile:     webhookCA,
		AuditWebhookClientCert: clientCert,
		AuditWebhookClientKey:  clientKey,
		AuditPolicyFile:        opts.AuditPolicyFile,
		APIServerArgs:          opts.APIServerArgs,
		Nodes:                  opts.Nodes,
		WorkDir:                filepath.Join(env.WorkDir, "cluster"),
		KeepWorkDir:            true, // removed with env.WorkDir
		Logger:                 opts.Logger,
		// The all-in-one must listen before kube-apiserver sends its first batch, and its
		// kubeconfig exists only once the cluster's files are written.
		BeforeAPIServer: func(ctx context.Context, c *Cluster) error {
			aio.Kubeconfig = c.Kubeconfig
			if aio.BinDir == "" {
				aio.BinDir = c.opts.BinDir
			}
			a, err := StartAllInOne(ctx, aio)
			if err != nil {
				return fmt.Errorf("kelemetry all-in-one: %w", err)
			}
			env.Kelemetry = a
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	return env, nil
}

// Healthy returns an error when a component or the all-in-one has exited.
func (e *Env) Healthy() error {
	if err := e.Cluster.Healthy(); err != nil {
		return err
	}
	return e.Kelemetry.Exited()
}

// StopKelemetry stops the all-in-one alone, the way an operator restarts it: SIGTERM, so that it
// drains its queues and saves its Event checkpoint. The cluster keeps running; kube-apiserver
// retries its audit batches (with backoff) until StartKelemetry. Not safe concurrently with the
// other methods of e.
func (e *Env) StopKelemetry() error { return e.Kelemetry.Stop() }

// KillKelemetry ends the all-in-one alone with SIGKILL, as a crash would. Not safe concurrently
// with the other methods of e.
func (e *Env) KillKelemetry() error { return e.Kelemetry.Kill() }

// StartKelemetry starts the all-in-one ended by StopKelemetry or KillKelemetry again, with the
// same ports, data dir and Event checkpoint file, and replaces e.Kelemetry.
func (e *Env) StartKelemetry(ctx context.Context) error {
	a, err := e.Kelemetry.StartAgain(ctx)
	if err != nil {
		return fmt.Errorf("restart kelemetry all-in-one: %w", err)
	}
	e.Kelemetry = a
	return nil
}

// Stop stops the cluster (kube-apiserver flushes its last audit batches), then the all-in-one,
// and removes the work folder unless KeepWorkDir.
func (e *Env) Stop(ctx context.Context) error {
	var errs []error
	if e.Cluster != nil {
		errs = append(errs, e.Cluster.Stop(ctx))
	}
	if e.Kelemetry != nil {
		errs = append(errs, e.Kelemetry.Stop())
	}
	if !e.keep && e.WorkDir != "" {
		errs = append(errs, os.RemoveAll(e.WorkDir))
	}
	return errors.Join(errs...)
}
