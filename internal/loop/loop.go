// Package loop runs a component's background goroutines with the lifecycle every Kelemetry part
// follows: Start is non-blocking and idempotent, Stop cancels the goroutines' context, waits for
// them until its own context ends, is safe without Start, and may be called more than once.
package loop

import (
	"context"
	"fmt"
	"sync"
)

// Group is a set of goroutines started together and stopped together. The zero value is ready.
type Group struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start runs each fn in its own goroutine with a context that Stop cancels (derived from
// context.Background(), never from the caller's start context). It reports false, and runs
// nothing, when the group was already started or stopped.
func (g *Group) Start(fns ...func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started || g.stopped {
		return false
	}
	g.started = true
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	for _, fn := range fns {
		g.wg.Go(func() { fn(ctx) })
	}
	return true
}

// Go adds one more goroutine to a started group; it reports false (and runs nothing) when the
// group is not running.
func (g *Group) Go(fn func(ctx context.Context)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.started || g.stopped {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := g.cancel
	g.cancel = func() { stop(); cancel() }
	g.wg.Go(func() { fn(ctx) })
	return true
}

// Running reports whether Start ran and Stop did not.
func (g *Group) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started && !g.stopped
}

// Stop cancels the goroutines and waits for them to return, or for ctx to end (then it returns an
// error naming what, and the goroutines still finish on their own). Later Starts do nothing.
func (g *Group) Stop(ctx context.Context, what string) error {
	g.mu.Lock()
	g.stopped = true
	cancel := g.cancel
	g.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return Wait(ctx, &g.wg, what)
}

// Wait waits for wg until ctx ends; then it returns an error naming what it waited for.
func Wait(ctx context.Context, wg *sync.WaitGroup, what string) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: stop: %w", what, ctx.Err())
	}
}
