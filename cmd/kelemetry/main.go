// Command allinone runs all of Kelemetry in one process on embedded defaults: the audit webhook
// (and optional audit log replay or follow), the aggregator with the built-in linkers, the
// embedded trace store and the HTTP API. No external service is needed.
//
//	go run ./cmd/kelemetry --replay testdata/rollout/audit.jsonl --replay-events testdata/rollout/events-core-v1.json
//
// Then: curl 'localhost:16686/api/objects?resource=deployments'. With
// --kelemetrix-config deploy/kelemetrix.yaml, /metrics also shows metrics of the audit stream.
//
// Both listeners bind to localhost by default. Exposed, they should serve TLS and authenticate:
//
//	go run ./cmd/kelemetry --audit-addr :8080 --http-addr :16686 \
//	  --audit-tls-cert tls/audit.crt --audit-tls-key tls/audit.key \
//	  --audit-client-ca tls/kube-apiserver-ca.crt \
//	  --http-tls-cert tls/api.crt --http-tls-key tls/api.key --http-token-file tls/api-tokens
//
// (certificate files are re-read when they change; see docs/operations/security.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/internal/version"
	"github.com/kelemetry/kelemetry/telemetry"
	"github.com/spf13/pflag"
)

// defaultGCPercent is the garbage collector's target (Go's GOGC) when the GOGC environment
// variable is not set: Go's default of 100, the heap grows to twice what stays live before a
// collection. The all-in-one ran at 200 until 2026-12: 200 took 14% fewer instructions per
// event then (6-8% on 2026-12-07) when the bulk fixture is posted at full speed
// (scripts/instructions.sh), but in a steady ingest the caches (diff versions, objects and
// traces seen, repeat checks) keep 60-130 MB live, and at 200 the heap grew to three times
// that: 493 MiB RSS after 15 minutes of 600 distinct events/s (scripts/soak.sh), where the
// project aims at 300. GOGC and GOMEMLIMIT in the
// environment still apply as usual. The memory limit is set too, from the container's limit or
// the memoryLimit key (kelemetry.Config.ApplyMemoryLimit): with no limit, the garbage of one round
// of heavy queries was still held when the next round started, and the process was OOM-killed
// under a 2 GiB limit.
const defaultGCPercent = 100

// gcPercent returns the GC target to set and true, or false when GOGC is set in the environment
// (getenv is os.Getenv): the operator's choice wins.
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

func main() {
	if pct, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(pct)
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(os.Stderr, "kelemetry:", err)
		}
		os.Exit(1)
	}
}

// newApp builds the application; options are appended (tests use them to populate values).
func newApp(cfg kelemetry.Config, logger *slog.Logger, opts ...fx.Option) *fx.App {
	return fx.New(append([]fx.Option{
		kelemetry.Modules(cfg.Role),
		fx.Supply(cfg, logger),
		fx.WithLogger(func() fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: logger.With("component", "fx")}
			// fx's wiring steps, and its errors with their dependency chains: serve says what went
			// wrong in one line (startError).
			l.UseLogLevel(slog.LevelDebug)
			l.UseErrorLevel(slog.LevelDebug)
			return l
		}),
		fx.StopTimeout(30 * time.Second),
	}, opts...)...)
}

// run runs the kelemetry command with args (os.Args[1:]).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand(ctx, stdout, stderr)
	root.SetArgs(normalizeArgs(args))
	return root.ExecuteContext(ctx)
}

// serve runs the application until SIGINT or SIGTERM (or ctx is done).
func serve(ctx context.Context, fs *pflag.FlagSet, build func(validate bool) (kelemetry.Config, slog.Level, error), pprofAddr string, stdout, stderr io.Writer) error {
	cfg, level, err := build(true)
	if errors.Is(err, errShowVersion) {
		_, err := fmt.Fprintln(stdout, version.Get().String())
		return err
	}
	if err != nil {
		return err
	}
	if err := checkFiles(cfg); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)
	telemetry.RouteKlog(logger)
	if file := fs.Lookup("config").Value.String(); file != "" && inMemory(cfg) {
		logger.Warn("traces are kept in memory and lost when the process exits: " + file + " sets no dataDir (or set --data-dir)")
	}
	// Before the application is built: the query frontend's memory budget defaults to a share of
	// the Go memory limit in effect then.
	if _, err := cfg.ApplyMemoryLimit(logger); err != nil {
		return err
	}

	app := newApp(cfg, logger)
	if err := app.Err(); err != nil {
		return startError(logger, err)
	}
	if pprofAddr != "" {
		stopPprof, err := servePprof(pprofAddr, logger)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return startError(logger, err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case sig := <-sigs:
		logger.Info("shutting down: draining the audit queue and flushing sinks", "signal", sig.String())
	case <-ctx.Done():
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	return app.Stop(stopCtx)
}

// inMemory reports whether cfg keeps traces in memory only.
func inMemory(cfg kelemetry.Config) bool {
	d := cfg.WithDefaults()
	return d.StoreBackend == "memory" || (d.StoreBackend == "" && d.Store.Dir == "")
}

// startError turns an error of building or starting the application into the sentence that
// explains it: fx wraps it in its dependency chain ("could not build arguments for function
// ...: failed to build ...: received non-nil error from function ..."), which is logged at debug
// level only.
func startError(logger *slog.Logger, err error) error {
	logger.Debug("start-up failed", "chain", err.Error())
	cause := err
	for {
		next := errors.Unwrap(cause)
		if next == nil || !isFxWrapper(cause) {
			break
		}
		cause = next
	}
	msg := cause.Error()
	// dig's errors do not all unwrap: cut their chain text at its last function frame.
	if i := strings.LastIndex(msg, "received non-nil error from function "); i >= 0 {
		rest := msg[i:]
		if j := strings.Index(rest, ": "); j >= 0 {
			if k := strings.Index(rest[j+2:], ": "); k >= 0 && strings.Contains(rest[j+2:j+2+k], "(") {
				msg = rest[j+2+k+2:]
			} else {
				msg = rest[j+2:]
			}
		}
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		msg += " (another process listens there: stop it, or choose another --audit-addr, --http-addr, --otlp-addr or --remote-storage-addr)"
	}
	return errors.New(msg)
}

// isFxWrapper reports whether err is one of fx's or dig's wrapping errors.
func isFxWrapper(err error) bool {
	t := fmt.Sprintf("%T", err)
	return strings.Contains(t, "dig.") || strings.Contains(t, "fx.")
}

// servePprof serves net/http/pprof on addr until the returned function is called.
func servePprof(addr string, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("pprof server stopped", "addr", addr, "error", err)
		}
	}()
	logger.Info("serving pprof", "addr", ln.Addr().String())
	return func() {
		_ = srv.Close()
		<-done
	}, nil
}
