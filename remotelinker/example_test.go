package remotelinker_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/remotelinker"
	"github.com/kelemetry/kelemetry/telemetry"
)

// A linker worker's whole main: connect, then serve a linker until SIGTERM. Kelemetry names the
// same linker in remoteLinkers.linkers (or --remote-linker nodes).
func ExampleServe() {
	nodes := aggregator.NewLinker("nodes", func(_ context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
		return nil, nil // read obj.Body, return the related objects
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	nc, err := natsqueue.Dial(natsqueue.Conn{URLs: []string{"nats://127.0.0.1:4222"}}, slog.Default())
	if err != nil {
		slog.Error("connect", "error", err)
		return
	}
	defer nc.Close()
	if err := remotelinker.Serve(ctx, nc, nodes, remotelinker.WorkerConfig{}, telemetry.Settings{}, 10*time.Second); err != nil {
		slog.Error("serve", "error", err)
	}
}
