// Package replay runs a one-shot ingestion of files in the background with a Start/Stop
// lifecycle, for the audit log and Kubernetes Event replays of the all-in-one.
package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/kelemetry/kelemetry/internal/loop"
)

// Runner replays files in order, once, in the background. S is the per-file statistics.
type Runner[S any] struct {
	name   string
	files  []string
	replay func(ctx context.Context, file string) (S, error)
	logger *slog.Logger

	mu    sync.Mutex
	stats []S
	err   error
	// run is the replay goroutine, set by the first Start (not by Stop, so that a Stop before
	// Start leaves a later Start free to run).
	run  *loop.Group
	done chan struct{}
}

// New returns a Runner that calls replay for each file. name prefixes errors and logs.
func New[S any](name string, files []string, replay func(ctx context.Context, file string) (S, error), logger *slog.Logger) *Runner[S] {
	if logger == nil {
		logger = slog.Default()
	}
	r := &Runner[S]{name: name, files: files, replay: replay, logger: logger.With("component", name), done: make(chan struct{})}
	if len(files) == 0 {
		close(r.done)
	}
	return r
}

// Start begins the replay in the background. It does not block.
func (r *Runner[S]) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.files) == 0 || r.run != nil {
		return nil
	}
	r.run = &loop.Group{}
	r.run.Start(func(ctx context.Context) {
		defer close(r.done)
		for _, f := range r.files {
			st, err := r.replay(ctx, f)
			r.mu.Lock()
			r.stats = append(r.stats, st)
			if err != nil {
				r.err = errors.Join(r.err, fmt.Errorf("%s %s: %w", r.name, f, err))
			}
			r.mu.Unlock()
			if err != nil {
				r.logger.Error("replay failed", "file", f, "error", err)
				continue
			}
			r.logger.Info("replay done", "file", f, "stats", st)
		}
	})
	return nil
}

// Stop cancels a running replay and waits for it. Safe without Start.
func (r *Runner[S]) Stop(ctx context.Context) error {
	r.mu.Lock()
	run := r.run
	r.mu.Unlock()
	if run == nil {
		return nil
	}
	return run.Stop(ctx, r.name)
}

// Done is closed when the replay finished (at once when there is nothing to replay).
func (r *Runner[S]) Done() <-chan struct{} { return r.done }

// Status returns per-file statistics so far and the replay's error, if any.
func (r *Runner[S]) Status() ([]S, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]S(nil), r.stats...), r.err
}
