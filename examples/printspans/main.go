// Command printspans is a binary composed from Kelemetry's parts rather than the all-in-one
// bundle: the audit webhook and the aggregator with one custom sink that prints every span as a
// line on standard output. It has no store, no query API and no web UI, and opens only the
// webhook's port. Point kube-apiserver's audit webhook at it, or post a recorded batch:
//
//	go run ./examples/printspans --audit-addr 127.0.0.1:8080 &
//	head -1 testdata/rollout/webhook-batches.jsonl | curl -s --data-binary @- localhost:8080/audit/demo
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Printer is an aggregator.Sink that writes one line per span.
type Printer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewPrinter returns a Printer writing to w.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w} }

// Export implements aggregator.Sink. It is called concurrently, hence the lock.
func (p *Printer) Export(_ context.Context, spans []*aggregator.Span) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sp := range spans {
		if _, err := fmt.Fprintf(p.w, "%s %-6s %s %q\n", sp.Start.UTC().Format(time.RFC3339Nano), sp.Kind, sp.Object, sp.Name); err != nil {
			return fmt.Errorf("print span: %w", err)
		}
	}
	return nil
}

// options is the whole binary: three modules, their configurations and one sink. Without
// telemetry.Module the parts log to the supplied Settings' logger and keep no metrics.
func options(out io.Writer, auditAddr, cluster string, logger *slog.Logger) fx.Option {
	return fx.Options(
		httpserver.Module, // opens only the listeners that have handlers: here the webhook's
		aggregator.Module, // object spans, event spans (and links, had it linkers)
		audit.Module,      // webhook, queue, consumer
		fx.Supply(telemetry.Settings{Logger: logger}, httpserver.Config{AuditAddr: auditAddr}, audit.Config{Cluster: cluster}),
		fx.Provide(aggregator.AsSink(func() *Printer { return NewPrinter(out) })),
		fx.NopLogger,
	)
}

func main() {
	addr := flag.String("audit-addr", "127.0.0.1:8080", "listen address of the audit webhook")
	cluster := flag.String("cluster", "default", "cluster name of POST /audit")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	app := fx.New(options(os.Stdout, *addr, *cluster, logger))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "printspans:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "printspans:", err)
		os.Exit(1)
	}
}
