// Package logtest has a slog handler that records what it is given, for tests that assert on
// logging (rate limits, levels, attributes).
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record.
type Recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

// Enabled implements slog.Handler: every level is recorded.
func (h *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h *Recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// WithAttrs implements slog.Handler; attributes added this way are not kept.
func (h *Recorder) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup implements slog.Handler; groups are not kept.
func (h *Recorder) WithGroup(string) slog.Handler { return h }

// Records returns the records so far.
func (h *Recorder) Records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}

// Count returns how many records of level were logged.
func (h *Recorder) Count(level slog.Level) int {
	n := 0
	for _, r := range h.Records() {
		if r.Level == level {
			n++
		}
	}
	return n
}

// Buffer is an io.Writer safe for concurrent use, to read what a logger (or any writer) wrote
// while it still writes.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
