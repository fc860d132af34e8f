package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/internal/proc"
)

// AllInOneOptions configure StartAllInOne.
type AllInOneOptions struct {
	// BinDir holds the kelemetry-allinone binary (see package bins).
	BinDir string
	// Cluster is the cluster name (--cluster); the webhook path is /audit/<Cluster>.
	Cluster string
	// Kubeconfig is passed as --kubeconfig when set.
	Kubeconfig string
	// DataDir is the store folder (--data-dir); "" keeps traces in memory.
	DataDir string
	// Window is --window when non-zero.
	Window time.Duration
	// LogFile receives the process output.
	LogFile string
	// LogLevel is --log-level (default info).
	LogLevel string
	// EventCheckpointFile is --event-checkpoint-file when set; by default the all-in-one keeps
	// its Event watch's checkpoint in <DataDir>/event-checkpoint.json.
	EventCheckpointFile string
	// AuditPort and HTTPPort are the listen ports on 127.0.0.1; 0 picks free ports.
	AuditPort, HTTPPort int
	// AuditTLS, when set, serves the webhook over TLS and requires a client certificate of its
	// CA (the URL of PlanAllInOne is then https).
	AuditTLS *WebhookTLS
	// ExtraArgs are appended to the command line (e.g. --link-rules=DIR, --config=FILE).
	ExtraArgs []string
	Logger    *slog.Logger
}

// WebhookTLS are the files of a webhook served over TLS with client-certificate authentication.
type WebhookTLS struct {
	// CertFile and KeyFile are the webhook's serving certificate (for 127.0.0.1) and key.
	CertFile, KeyFile string
	// ClientCAFile is the CA of the accepted client certificates.
	ClientCAFile string
}

// AllInOne is a running cmd/kelemetry.
type AllInOne struct {
	// URL is the API (http://127.0.0.1:port).
	URL string
	// AuditURL is the audit webhook of the cluster (http://127.0.0.1:port/audit/<cluster>).
	AuditURL string
	// LogFile is the process output.
	LogFile string
	// AuditTLS are the webhook's TLS files (nil: plain HTTP, no client certificate required).
	AuditTLS *WebhookTLS
	// EventCheckpoint is the file of the Event watch's checkpoint ("" with neither DataDir nor
	// EventCheckpointFile).
	EventCheckpoint string
	opts            AllInOneOptions // with the ports picked
	proc            *proc.Process
}

// PlanAllInOne picks the ports of an all-in-one not started yet and returns its webhook URL, so
// that kube-apiserver can be configured before the all-in-one starts.
func PlanAllInOne(opts *AllInOneOptions) (auditURL string, err error) {
	if opts.AuditPort == 0 {
		if opts.AuditPort, err = proc.FreePort(); err != nil {
			return "", err
		}
	}
	if opts.HTTPPort == 0 {
		if opts.HTTPPort, err = proc.FreePort(); err != nil {
			return "", err
		}
	}
	scheme := "http://"
	if opts.AuditTLS != nil {
		scheme = "https://"
	}
	return scheme + proc.HostPort(opts.AuditPort) + "/audit/" + opts.Cluster, nil
}

// StartAllInOne starts cmd/kelemetry and waits until /healthz answers.
func StartAllInOne(ctx context.Context, opts AllInOneOptions) (*AllInOne, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Cluster == "" {
		opts.Cluster = "test"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	auditURL, err := PlanAllInOne(&opts)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--cluster=" + opts.Cluster,
		"--audit-addr=" + proc.HostPort(opts.AuditPort),
		"--http-addr=" + proc.HostPort(opts.HTTPPort),
		"--data-dir=" + opts.DataDir,
		"--log-level=" + opts.LogLevel,
	}
	if t := opts.AuditTLS; t != nil {
		args = append(args, "--audit-tls-cert="+t.CertFile, "--audit-tls-key="+t.KeyFile, "--audit-client-ca="+t.ClientCAFile)
	}
	if opts.Kubeconfig != "" {
		args = append(args, "--kubeconfig="+opts.Kubeconfig)
	}
	if opts.Window != 0 {
		args = append(args, "--window="+opts.Window.String())
	}
	args = append(args, opts.ExtraArgs...)
	checkpoint := opts.EventCheckpointFile
	if checkpoint != "" {
		args = append(args, "--event-checkpoint-file="+checkpoint)
	} else if opts.DataDir != "" {
		checkpoint = filepath.Join(opts.DataDir, "event-checkpoint.json")
	}
	p, err := proc.Start(opts.Logger, "kelemetry-allinone", filepath.Join(opts.BinDir, bins.AllInOne), args, nil, opts.LogFile)
	if err != nil {
		return nil, err
	}
	a := &AllInOne{URL: "http://" + proc.HostPort(opts.HTTPPort), AuditURL: auditURL, LogFile: opts.LogFile, AuditTLS: opts.AuditTLS,
		EventCheckpoint: checkpoint, opts: opts, proc: p}
	client := &http.Client{Timeout: 2 * time.Second}
	err = poll(ctx, 100*time.Millisecond, time.Minute, "kelemetry-allinone /healthz", func(ctx context.Context) (bool, error) {
		if done, perr := p.Exited(); done {
			return false, fmt.Errorf("kelemetry-allinone exited (%v): %s", perr, p.LogTail(3000))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/healthz", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	return a, nil
}

// Exited returns an error when the process has ended.
func (a *AllInOne) Exited() error {
	if done, err := a.proc.Exited(); done {
		return fmt.Errorf("kelemetry-allinone exited (%v): %s", err, a.proc.LogTail(3000))
	}
	return nil
}

// Stop sends SIGTERM (the all-in-one drains its queue and flushes), then SIGKILL after 30s.
func (a *AllInOne) Stop() error { return a.proc.Stop(30 * time.Second) }

// Kill ends the all-in-one with SIGKILL, as a crash would: nothing is drained or saved.
func (a *AllInOne) Kill() error { return a.proc.Kill() }

// StartAgain starts a stopped all-in-one again with the same options: the same ports (the
// webhook URL kube-apiserver posts to and the API URL stay valid), data dir, Event checkpoint
// and log file (appended to). It returns the new process.
func (a *AllInOne) StartAgain(ctx context.Context) (*AllInOne, error) {
	if done, _ := a.proc.Exited(); !done {
		return nil, errors.New("kelemetry-allinone is still running: Stop it first")
	}
	return StartAllInOne(ctx, a.opts)
}
