package apitrace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"

	"github.com/kelemetry/kelemetry/internal/otlpin"
)

// maxReplayLine bounds one line of a replayed file.
const maxReplayLine = 64 << 20

// replay feeds the OTLP/JSON lines of files (one ExportTraceServiceRequest each) to j in order,
// waiting while j is full, until ctx ends. It returns the first unreadable line's error.
func replay(ctx context.Context, j *joiner, files ...string) (spans int, err error) {
	for _, f := range files {
		n, err := replayFile(ctx, j, f)
		spans += n
		if err != nil {
			return spans, err
		}
	}
	return spans, nil
}

func replayFile(ctx context.Context, j *joiner, file string) (int, error) {
	fh, err := os.Open(file)
	if err != nil {
		return 0, fmt.Errorf("apitrace replay: %w", err)
	}
	defer func() { _ = fh.Close() }()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 0, 64<<10), maxReplayLine)
	total, line := 0, 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := otlpin.UnmarshalJSON(b, req); err != nil {
			return total, fmt.Errorf("apitrace replay %s:%d: %w", file, line, err)
		}
		spans, bad := spansOf(req)
		for {
			err := j.accept(ctx, spans, bad)
			if err == nil {
				break
			}
			if !errors.Is(err, errFull) {
				return total, err
			}
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		total += len(spans)
	}
	if err := sc.Err(); err != nil {
		return total, fmt.Errorf("apitrace replay %s: %w", file, err)
	}
	return total, nil
}

// dumper appends accepted requests to a file as OTLP/JSON lines, up to a size.
type dumper struct {
	mu      sync.Mutex
	f       *os.File
	written int64
	max     int64
	log     *slog.Logger
	skipped int64
}

func newDumper(path string, max int64, log *slog.Logger) (*dumper, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apitrace dump: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("apitrace dump: %w", err)
	}
	return &dumper{f: f, written: st.Size(), max: max, log: log}, nil
}

// write records req; nil d does nothing.
func (d *dumper) write(req *coltracepb.ExportTraceServiceRequest) {
	if d == nil {
		return
	}
	b, err := otlpin.MarshalJSON(req)
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil || d.written+int64(len(b))+1 > d.max {
		if d.skipped == 0 {
			d.log.Warn("the dump of OTLP requests is full: later requests are not written", "max", d.max)
		}
		d.skipped++
		return
	}
	n, err := d.f.Write(append(b, '\n'))
	d.written += int64(n)
	if err != nil {
		d.log.Warn("writing the dump of OTLP requests failed", "error", err)
	}
}

func (d *dumper) close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}
