// Package jaegerproc runs a real Jaeger v2 (the binary that package bins builds from the tool
// module e2e/tools/jaeger and caches) for the end-to-end tests, in one of two configuration
// shapes (see Mode):
//
//   - ModeBackend: Jaeger as the trace database that Kelemetry writes to over OTLP gRPC
//     (Jaeger.OTLPAddr) and reads back over jaeger.storage.v2 (Jaeger.RemoteStorageAddr);
//   - ModeQuery: Jaeger Query over a jaeger.storage.v2 server such as Kelemetry's
//     --remote-storage-addr, answering the Jaeger HTTP API at Jaeger.QueryURL.
//
// Every listener is on 127.0.0.1 on a port picked free at the first start, so that parallel
// runs do not clash; Restart and StartAgain keep the ports. The configuration is written to
// Options.Dir/jaeger.yaml, the process output appended to Options.Dir/jaeger.log (StartT shows
// its tail when the test failed).
package jaegerproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/internal/proc"
)

// Options configure Start.
type Options struct {
	// Bin is the jaeger binary (default: bins.Jaeger in bins.Dir()).
	Bin string
	// Dir receives jaeger.yaml and jaeger.log (required; t.TempDir() in tests).
	Dir string
	// Mode is the configuration shape (default ModeBackend).
	Mode Mode
	// RemoteStorage is the jaeger.storage.v2 server ModeQuery reads (HOST:PORT, plaintext).
	RemoteStorage string
	// RemoteTimeout bounds each call to RemoteStorage (default DefaultRemoteTimeout).
	RemoteTimeout time.Duration
	// MaxTraces bounds ModeBackend's memory backend (default DefaultMaxTraces).
	MaxTraces int
	// BadgerDir, when set, makes ModeBackend store traces in a Badger database in this folder
	// instead of memory, so that they survive a restart.
	BadgerDir string
	// Ports are the listen ports; zero ones are picked free at the first start.
	Ports Ports
	// LogLevel is Jaeger's log level (default DefaultLogLevel).
	LogLevel string
	// StartTimeout bounds the wait until Jaeger is healthy (default 30s).
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL (default 10s).
	StopGrace time.Duration
	// Logger receives the package's own messages (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxTraces == 0 {
		o.MaxTraces = DefaultMaxTraces
	}
	if o.RemoteTimeout == 0 {
		o.RemoteTimeout = DefaultRemoteTimeout
	}
	if o.LogLevel == "" {
		o.LogLevel = DefaultLogLevel
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.StopGrace == 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Jaeger is a Jaeger process started by Start. Its methods are safe for concurrent use.
type Jaeger struct {
	// QueryURL is Jaeger Query's HTTP API (http://127.0.0.1:port).
	QueryURL string
	// QueryGRPCAddr is Jaeger Query's gRPC API (127.0.0.1:port).
	QueryGRPCAddr string
	// OTLPAddr is the OTLP gRPC receiver (127.0.0.1:port), e.g. Kelemetry's --otlp-endpoint.
	OTLPAddr string
	// RemoteStorageAddr is the remote_storage extension serving jaeger.storage.v2
	// (127.0.0.1:port); empty in ModeQuery.
	RemoteStorageAddr string
	// HealthURL is healthcheckv2's status endpoint (http://127.0.0.1:port/status).
	HealthURL string
	// ConfigFile and LogFile are Dir/jaeger.yaml and Dir/jaeger.log.
	ConfigFile, LogFile string
	// Ports are the ports in use.
	Ports Ports

	opts Options

	mu   sync.Mutex
	proc *proc.Process // nil once stopped
}

// Start writes the configuration and starts Jaeger, then waits until healthcheckv2 reports it
// healthy and its listeners accept connections.
func Start(ctx context.Context, opts Options) (*Jaeger, error) {
	opts = opts.withDefaults()
	if opts.Dir == "" {
		return nil, errors.New("jaegerproc: Options.Dir is required")
	}
	if opts.Bin == "" {
		dir, err := bins.Dir()
		if err != nil {
			return nil, err
		}
		opts.Bin = filepath.Join(dir, bins.Jaeger)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("jaegerproc: %w", err)
	}
	// A port picked free may be taken by another process before Jaeger binds it: pick again.
	const attempts = 3
	given := opts.Ports
	for attempt := 1; ; attempt++ {
		opts.Ports = given
		if err := opts.Ports.fill(opts.Mode); err != nil {
			return nil, err
		}
		j, err := newJaeger(opts)
		if err != nil {
			return nil, err
		}
		err = j.StartAgain(ctx)
		if err == nil {
			return j, nil
		}
		if attempt == attempts || !errors.Is(err, errPortBusy) || opts.Ports == given {
			return nil, err
		}
		opts.Logger.Info("jaeger: a port was taken meanwhile, picking new ones", "attempt", attempt, "error", err)
	}
}

// errPortBusy says that Jaeger could not listen on one of its ports.
var errPortBusy = errors.New("jaegerproc: a port is in use")

// newJaeger writes the configuration of opts (with every port set).
func newJaeger(opts Options) (*Jaeger, error) {
	cfg, err := Config(opts, opts.Ports)
	if err != nil {
		return nil, err
	}
	j := &Jaeger{
		QueryURL:      "http://" + Addr(opts.Ports.QueryHTTP),
		QueryGRPCAddr: Addr(opts.Ports.QueryGRPC),
		OTLPAddr:      Addr(opts.Ports.OTLPGRPC),
		HealthURL:     "http://" + Addr(opts.Ports.Health) + "/status",
		ConfigFile:    filepath.Join(opts.Dir, "jaeger.yaml"),
		LogFile:       filepath.Join(opts.Dir, "jaeger.log"),
		Ports:         opts.Ports,
		opts:          opts,
	}
	if opts.Mode == ModeBackend {
		j.RemoteStorageAddr = Addr(opts.Ports.RemoteStorage)
	}
	if err := os.WriteFile(j.ConfigFile, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("jaegerproc: %w", err)
	}
	return j, nil
}

// StartAgain starts a stopped Jaeger again with the same configuration and ports (its log is
// appended to) and waits until it is healthy. In ModeBackend the memory backend starts empty.
func (j *Jaeger) StartAgain(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.proc != nil {
		if done, _ := j.proc.Exited(); !done {
			return errors.New("jaegerproc: jaeger is running: Stop it first")
		}
	}
	var logStart int64
	if st, err := os.Stat(j.LogFile); err == nil {
		logStart = st.Size()
	}
	// The remote_storage extension traces itself whatever the configuration says, to the OTLP
	// default endpoint (localhost:4317, maybe another test's Jaeger), and waits up to 10s at
	// shutdown to flush: sample nothing instead.
	env := []string{"OTEL_TRACES_SAMPLER=always_off"}
	p, err := proc.Start(j.opts.Logger, "jaeger", j.opts.Bin, []string{"--config=file:" + j.ConfigFile}, env, j.LogFile)
	if err != nil {
		return fmt.Errorf("jaegerproc: %w", err)
	}
	j.proc = p
	j.opts.Logger.Debug("jaeger started", "mode", j.opts.Mode, "query", j.QueryURL)
	if err := j.waitHealthy(ctx, p); err != nil {
		_ = p.Stop(j.opts.StopGrace)
		if log := fileFrom(j.LogFile, logStart); strings.Contains(log, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortBusy, err)
		}
		return fmt.Errorf("%w; log tail:\n%s", err, proc.FileTail(j.LogFile, 4000))
	}
	return nil
}

// fileFrom returns the file's content from offset on (at most 1 MiB).
func fileFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

func (j *Jaeger) waitHealthy(ctx context.Context, p *proc.Process) error {
	ctx, cancel := context.WithTimeout(ctx, j.opts.StartTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if done, err := p.Exited(); done {
			return fmt.Errorf("jaegerproc: jaeger exited while starting (%v)", err)
		}
		last = j.check(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("jaegerproc: jaeger not healthy within %s: %w", j.opts.StartTimeout, last)
		case <-tick.C:
		}
	}
}

// check reports nil when healthcheckv2 answers healthy and every listener accepts connections.
func (j *Jaeger) check(ctx context.Context) error {
	if err := j.Healthy(ctx); err != nil {
		return err
	}
	addrs := []string{j.QueryGRPCAddr, j.OTLPAddr, strings.TrimPrefix(j.QueryURL, "http://")}
	if j.RemoteStorageAddr != "" {
		addrs = append(addrs, j.RemoteStorageAddr)
	}
	var d net.Dialer
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", a)
		if err != nil {
			return fmt.Errorf("jaegerproc: %w", err)
		}
		c.Close()
	}
	return nil
}

// Healthy asks healthcheckv2 (GET /status) and returns nil when it answers 200.
func (j *Jaeger) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.HealthURL, nil)
	if err != nil {
		return fmt.Errorf("jaegerproc: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("jaegerproc: health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaegerproc: health: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Exited returns an error when the process has ended (or was stopped), nil while it runs.
func (j *Jaeger) Exited() error {
	j.mu.Lock()
	p := j.proc
	j.mu.Unlock()
	if p == nil {
		return errors.New("jaegerproc: jaeger is stopped")
	}
	if done, err := p.Exited(); done {
		return fmt.Errorf("jaegerproc: jaeger exited (%v): %s", err, proc.FileTail(j.LogFile, 3000))
	}
	return nil
}

// Stop sends SIGTERM, then SIGKILL after Options.StopGrace, and waits for the process to end.
// Stopping a stopped Jaeger does nothing.
func (j *Jaeger) Stop() error {
	return j.end(func(p *proc.Process) error { return p.Stop(j.opts.StopGrace) })
}

// Kill ends Jaeger with SIGKILL, as a crash would.
func (j *Jaeger) Kill() error {
	return j.end(func(p *proc.Process) error { return p.Kill() })
}

func (j *Jaeger) end(how func(*proc.Process) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.proc == nil {
		return nil
	}
	if err := how(j.proc); err != nil {
		return fmt.Errorf("jaegerproc: %w", err)
	}
	j.proc = nil
	return nil
}

// Restart stops Jaeger (SIGTERM) and starts it again on the same ports.
func (j *Jaeger) Restart(ctx context.Context) error {
	if err := j.Stop(); err != nil {
		return err
	}
	return j.StartAgain(ctx)
}

// LogTail returns the last n bytes of Jaeger's log.
func (j *Jaeger) LogTail(n int64) string { return proc.FileTail(j.LogFile, n) }
