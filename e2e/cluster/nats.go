package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/internal/proc"
)

// NATSOptions configure StartNATS.
type NATSOptions struct {
	// BinDir holds the nats-server binary (see package bins).
	BinDir string
	// StoreDir is JetStream's store folder.
	StoreDir string
	// LogFile receives the process output.
	LogFile string
	Logger  *slog.Logger
}

// NATS is a running single nats-server with JetStream, listening on loopback.
type NATS struct {
	// URL is the client URL (nats://127.0.0.1:port).
	URL string
	// MonitorURL is the HTTP monitoring endpoint (http://127.0.0.1:port: /healthz, /jsz).
	MonitorURL string
	proc       *proc.Process
	http       *http.Client
}

// StartNATS starts nats-server with JetStream and waits until its /healthz says JetStream is
// ready.
func StartNATS(ctx context.Context, opts NATSOptions) (*NATS, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	monitor, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--name=kelemetry-e2e",
		"--addr=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--http_port=" + strconv.Itoa(monitor),
		"--jetstream", "--store_dir=" + opts.StoreDir,
	}
	p, err := proc.Start(opts.Logger, "nats-server", filepath.Join(opts.BinDir, bins.NATSServer), args, nil, opts.LogFile)
	if err != nil {
		return nil, err
	}
	n := &NATS{URL: "nats://" + proc.HostPort(port), MonitorURL: "http://" + proc.HostPort(monitor), proc: p,
		http: &http.Client{Timeout: 5 * time.Second}}
	err = poll(ctx, 100*time.Millisecond, 30*time.Second, "nats-server /healthz", func(ctx context.Context) (bool, error) {
		if done, perr := p.Exited(); done {
			return false, fmt.Errorf("nats-server exited (%v): %s", perr, p.LogTail(3000))
		}
		var h struct {
			Status string `json:"status"`
		}
		if err := n.get(ctx, "/healthz", &h); err != nil {
			return false, err
		}
		return h.Status == "ok", nil
	})
	if err != nil {
		_ = p.Stop(5 * time.Second)
		return nil, err
	}
	return n, nil
}

// StreamState is what /jsz says of one stream.
type StreamState struct {
	// Messages the stream holds now (on a work-queue stream: not acknowledged yet).
	Messages uint64 `json:"messages"`
	// LastSeq is the sequence of the last message stored: on a fresh server, how many were.
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumer_count"`
}

// Stream returns the state of the stream named name (an error when there is none).
func (n *NATS) Stream(ctx context.Context, name string) (StreamState, error) {
	var jsz struct {
		Accounts []struct {
			Streams []struct {
				Name  string      `json:"name"`
				State StreamState `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := n.get(ctx, "/jsz?streams=true", &jsz); err != nil {
		return StreamState{}, err
	}
	for _, a := range jsz.Accounts {
		for _, s := range a.Streams {
			if s.Name == name {
				return s.State, nil
			}
		}
	}
	return StreamState{}, fmt.Errorf("nats-server: no stream %s", name)
}

// Exited returns an error when the process has ended.
func (n *NATS) Exited() error {
	if done, err := n.proc.Exited(); done {
		return fmt.Errorf("nats-server exited (%v): %s", err, n.proc.LogTail(3000))
	}
	return nil
}

// Stop stops nats-server (SIGTERM, then SIGKILL after 10s).
func (n *NATS) Stop() error { return n.proc.Stop(10 * time.Second) }

func (n *NATS) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.MonitorURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nats-server GET %s: %s: %.200s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("nats-server GET %s: %w", path, err)
	}
	return nil
}
