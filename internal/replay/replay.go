// Package replay runs a one-shot ingestion of files in the background with a Start/Stop
// lifecycle, for the audit log and Kubernetes Event replays of the all-in-one.
package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kelemetry/kelemetry/internal/loop"
)

// Runner replays files in order, once, in the background. S is the per-file statistics.
type Runner[S any] struct {
	name   string
	files  []string
	replay func(ctx context.Context, file string, t *Tracker[S]) (S, error)
	logger *slog.Logger

	mu      sync.Mutex
	stats   []Progress[S]
	current *Tracker[S] // the file being replayed, nil between files
	err     error
	// run is the replay goroutine, set by the first Start (not by Stop, so that a Stop before
	// Start leaves a later Start free to run).
	run  *loop.Group
	done chan struct{}
}

// Progress is where the replay of one file stands: done, or how far it read.
type Progress[S any] struct {
	File string
	// BytesRead of BytesTotal (the file's size; for a compressed file, the compressed bytes).
	BytesRead, BytesTotal int64
	// Elapsed is the time the file has taken so far (or took).
	Elapsed time.Duration
	// Done is true once the file is read and flushed (or failed).
	Done bool
	// Stats are the replay's statistics: final when Done, the latest reported otherwise.
	Stats S
}

// Tracker follows the replay of one file: the replay function reads through Reader and reports
// its statistics with Report as it goes, for Runner.Status.
type Tracker[S any] struct {
	file    string
	total   int64
	started time.Time
	read    atomic.Int64
	stats   atomic.Pointer[S]
}

// Reader counts the bytes read from r (the file itself, before any decompression).
func (t *Tracker[S]) Reader(r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return countingReader{r: r, n: &t.read}
}

// Report records the statistics so far. A nil Tracker ignores it.
func (t *Tracker[S]) Report(s S) {
	if t != nil {
		t.stats.Store(&s)
	}
}

func (t *Tracker[S]) progress(done bool, final S) Progress[S] {
	p := Progress[S]{File: t.file, BytesRead: t.read.Load(), BytesTotal: t.total, Elapsed: time.Since(t.started), Done: done, Stats: final}
	if !done {
		if s := t.stats.Load(); s != nil {
			p.Stats = *s
		}
	}
	return p
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// New returns a Runner that calls replay for each file. name prefixes errors and logs.
func New[S any](name string, files []string, replay func(ctx context.Context, file string, t *Tracker[S]) (S, error), logger *slog.Logger) *Runner[S] {
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
			t := &Tracker[S]{file: f, started: time.Now()}
			if fi, err := os.Stat(f); err == nil {
				t.total = fi.Size()
			}
			r.mu.Lock()
			r.current = t
			r.mu.Unlock()
			st, err := r.replay(ctx, f, t)
			r.mu.Lock()
			r.current = nil
			r.stats = append(r.stats, t.progress(true, st))
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

// Status returns the progress of each file replayed or being replayed, in order, and the
// replay's error, if any.
func (r *Runner[S]) Status() ([]Progress[S], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Progress[S](nil), r.stats...)
	if r.current != nil {
		var zero S
		out = append(out, r.current.progress(false, zero))
	}
	return out, r.err
}
