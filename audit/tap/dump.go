package tap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kelemetry/kelemetry/audit/webhook"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults of DumpConfig.
const (
	defaultDumpMaxBytes    = 100 << 20
	defaultDumpMaxFiles    = 5
	defaultDumpBufferBytes = 64 << 20
)

// DumpConfig configures the audit dump (Dumper): every event the webhook accepted, written as
// one JSON line to a size-bounded, rotating file. The zero value (no Path) dumps nothing.
type DumpConfig struct {
	// Path is the file written. When it would grow past MaxBytes it is renamed Path.1 (Path.1
	// becomes Path.2, and so on; Path.<MaxFiles> is removed) and a new Path is started.
	Path string `yaml:"path"`
	// MaxBytes is the size at which Path rotates (default 100 MiB). A single event longer than
	// this is not dumped (counted, reason too_large).
	MaxBytes int64 `yaml:"maxBytes"`
	// MaxFiles is how many rotated files are kept (default 5): the dump takes at most
	// (MaxFiles+1) x MaxBytes on disk.
	MaxFiles int `yaml:"maxFiles"`
	// BufferBytes bounds the bytes of accepted batches waiting to be written (default 64 MiB).
	// A batch that does not fit is not dumped (counted, reason buffer_full): the webhook never
	// waits for the dump.
	BufferBytes int64 `yaml:"bufferBytes"`
}

// Enabled reports whether a dump file is configured.
func (c DumpConfig) Enabled() bool { return c.Path != "" }

// withDefaults returns c with zero fields set to their defaults.
func (c DumpConfig) withDefaults() DumpConfig {
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultDumpMaxBytes
	}
	if c.MaxFiles == 0 {
		c.MaxFiles = defaultDumpMaxFiles
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = defaultDumpBufferBytes
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c DumpConfig) Validate() error {
	switch {
	case c.MaxBytes < 0:
		return fmt.Errorf("audit dump maxBytes %d is negative", c.MaxBytes)
	case c.MaxFiles < 0:
		return fmt.Errorf("audit dump maxFiles %d is negative", c.MaxFiles)
	case c.BufferBytes < 0:
		return fmt.Errorf("audit dump bufferBytes %d is negative", c.BufferBytes)
	}
	return nil
}

// Reasons of kelemetry.audit.dump.dropped_lines.
const (
	dumpDropBufferFull = "buffer_full"
	dumpDropTooLarge   = "too_large"
	dumpDropWrite      = "write_error"
	dumpDropShutdown   = "shutdown"
	dumpDropStopped    = "stopped"
)

// Dumper is a BatchTap that writes each accepted event as one line of JSON (the audit.k8s.io/v1
// Event as received, compacted to one line; items the webhook dropped are left out) to
// DumpConfig.Path, which `--replay` (ReplayFile) reads back. Batches are buffered (within
// BufferBytes) and written by a goroutine of its own; the file is flushed whenever the buffer
// runs empty and on Stop. Rotated files hold older events: replay Path.<n> ... Path.1, Path.
type Dumper struct {
	cfg    DumpConfig
	logger *slog.Logger
	q      *byteQueue

	lines     metric.Int64Counter
	bytes     metric.Int64Counter
	rotations metric.Int64Counter
	dropped   metric.Int64Counter
	errLog    ratelog.Limiter

	group loop.Group
	abort atomic.Bool // Stop's context ended: drop what is left

	// Owned by the writing goroutine (and Stop after it).
	f    *os.File
	w    *bufio.Writer
	size int64
	line []byte
}

// NewDumper returns a dumper of cfg (which must be enabled); ts gives its logger and meter
// provider (either may be unset). It opens nothing until Start.
func NewDumper(cfg DumpConfig, ts telemetry.Settings) (*Dumper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("audit dump: no path")
	}
	cfg = cfg.withDefaults()
	d := &Dumper{cfg: cfg, logger: ts.Log().With("component", "audit.dump", "path", cfg.Path),
		q: newByteQueue(cfg.BufferBytes), errLog: ratelog.Limiter{Burst: 5, Every: 10 * time.Second}}
	meter := instrument.NewMeter(ts, meterName)
	d.lines = meter.Counter("kelemetry.audit.dump.lines", "Audit events written to the dump file.", "{line}", *attribute.EmptySet())
	d.bytes = meter.Counter("kelemetry.audit.dump.bytes", "Bytes written to the dump file.", "By", *attribute.EmptySet())
	d.rotations = meter.Counter("kelemetry.audit.dump.rotations", "Rotations of the dump file.", "{rotation}", *attribute.EmptySet())
	d.dropped = meter.Counter("kelemetry.audit.dump.dropped_lines",
		"Accepted audit events not dumped, by reason (buffer_full, too_large, write_error, shutdown, stopped).", "{line}",
		instrument.Sets("reason", dumpDropBufferFull, dumpDropTooLarge, dumpDropWrite, dumpDropShutdown, dumpDropStopped)...)
	meter.Gauge("kelemetry.audit.dump.buffer_bytes", "Bytes of accepted batches waiting to be dumped.", "By",
		func() (int64, bool) { return d.q.size(), true })
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("audit dump: %w", err)
	}
	return d, nil
}

// Accepted buffers b for writing, or drops and counts it when the buffer is full. It never blocks.
func (d *Dumper) Accepted(ctx context.Context, b webhook.AcceptedBatch) {
	if err := d.q.put(b); err != nil {
		reason := dumpDropBufferFull
		if errors.Is(err, errQueueClosed) {
			reason = dumpDropStopped
		}
		d.drop(ctx, reason, int64(b.Events))
	}
}

func (d *Dumper) drop(ctx context.Context, reason string, n int64) {
	if n > 0 {
		d.dropped.Add(ctx, n, metric.WithAttributes(attribute.String("reason", reason)))
	}
}

// Start opens (appends to) the dump file, creating its folder, and starts writing. It does not
// block.
func (d *Dumper) Start(_ context.Context) error {
	if d.q.isClosed() {
		return errors.New("audit dump: start: stopped")
	}
	if err := os.MkdirAll(filepath.Dir(d.cfg.Path), 0o700); err != nil {
		return fmt.Errorf("audit dump: %w", err)
	}
	if err := d.open(); err != nil {
		return err
	}
	d.group.Start(d.run)
	return nil
}

// Stop refuses new batches, writes what is buffered, flushes and closes the file. If ctx ends
// first, the rest is dropped (counted, reason shutdown) and ctx's error returned. Stop is safe
// without Start and may be called more than once.
func (d *Dumper) Stop(ctx context.Context) error {
	d.q.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.group.Stop(context.Background(), "audit dump")
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		d.abort.Store(true)
		<-done // the writer returns after the line it is writing
		err = fmt.Errorf("audit dump: stop: %w", ctx.Err())
	}
	for _, b := range d.q.takeAll() { // never started, or aborted
		d.drop(context.Background(), dumpDropShutdown, int64(b.Events))
	}
	return errors.Join(err, d.close())
}

func (d *Dumper) run(ctx context.Context) {
	for {
		for !d.abort.Load() {
			b, ok := d.q.peek()
			if !ok {
				break
			}
			d.write(b)
			d.q.pop()
		}
		if d.w != nil {
			if err := d.w.Flush(); err != nil {
				d.writeFailed(err)
			}
		}
		if d.abort.Load() {
			return
		}
		select {
		case <-d.q.wake:
		case <-ctx.Done():
			// Stop: write what is left, then return.
			if _, ok := d.q.peek(); !ok {
				return
			}
		}
	}
}

// write writes the accepted items of b, one line each.
func (d *Dumper) write(b webhook.AcceptedBatch) {
	ctx := context.Background()
	written := int64(0)
	err := eachItem(b.Body, b.Dropped, b.Events+len(b.Dropped), func(raw []byte) error {
		if d.abort.Load() {
			return errQueueClosed
		}
		d.line = append(appendCompactJSON(d.line[:0], raw), '\n')
		n := int64(len(d.line))
		if n > d.cfg.MaxBytes {
			d.drop(ctx, dumpDropTooLarge, 1)
			written++
			return nil
		}
		if d.size > 0 && d.size+n > d.cfg.MaxBytes {
			if err := d.rotate(); err != nil {
				return err
			}
		}
		if d.w == nil {
			if err := d.open(); err != nil {
				return err
			}
		}
		if _, err := d.w.Write(d.line); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		d.size += n
		written++
		d.lines.Add(ctx, 1)
		d.bytes.Add(ctx, n)
		return nil
	})
	if err != nil {
		reason := dumpDropWrite
		if errors.Is(err, errQueueClosed) {
			reason = dumpDropShutdown
		} else {
			d.writeFailed(err)
		}
		d.drop(ctx, reason, int64(b.Events)-written)
	}
}

// writeFailed logs err (rate-limited) and closes the file, to be opened again for the next line.
func (d *Dumper) writeFailed(err error) {
	if ok, suppressed := d.errLog.Allow(time.Now()); ok {
		d.logger.Warn("audit dump write failed", "error", err, "suppressedSinceLastLog", suppressed)
	}
	if d.f != nil {
		_ = d.f.Close()
	}
	d.f, d.w = nil, nil
}

// open opens Path for appending.
func (d *Dumper) open() error {
	f, err := os.OpenFile(d.cfg.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit dump: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return errors.Join(fmt.Errorf("audit dump: %w", err), f.Close())
	}
	d.f, d.size = f, st.Size()
	if d.w == nil {
		d.w = bufio.NewWriterSize(f, 256<<10)
	} else {
		d.w.Reset(f)
	}
	return nil
}

// close flushes and closes the file.
func (d *Dumper) close() error {
	if d.f == nil {
		return nil
	}
	err := d.w.Flush()
	err = errors.Join(err, d.f.Sync(), d.f.Close())
	d.f, d.w = nil, nil
	if err != nil {
		return fmt.Errorf("audit dump: close: %w", err)
	}
	return nil
}

// rotate closes Path, shifts Path.<i> to Path.<i+1> (Path.<MaxFiles> is replaced), renames
// Path to Path.1 and opens a new Path.
func (d *Dumper) rotate() error {
	if err := d.close(); err != nil {
		return err
	}
	name := func(i int) string { return d.cfg.Path + "." + strconv.Itoa(i) }
	for i := d.cfg.MaxFiles - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit dump: rotate: %w", err)
		}
	}
	if err := os.Rename(d.cfg.Path, name(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("audit dump: rotate: %w", err)
	}
	d.rotations.Add(context.Background(), 1)
	return d.open()
}

// meterName is the instrumentation scope of the taps' metrics (the audit pipeline's).
const meterName = "github.com/kelemetry/kelemetry/audit"
