package auditlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/kelemetry/kelemetry/audit/queue"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/internal/replay"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/telemetry"
)

const (
	// maxLineSize is the longest audit log line read; a longer line is skipped and counted as bad.
	maxLineSize = 16 << 20
	// defaultPollInterval is how often a Follower looks for new lines, rotation and truncation.
	defaultPollInterval = 250 * time.Millisecond

	replayBatchSize = 256
	readBufferSize  = 64 << 10
	// reportLines is how often a replay reports its progress (for /healthz), in lines.
	reportLines = 1024
)

// ReplayStats counts what a replay read.
type ReplayStats struct {
	// Lines is the number of non-empty lines read.
	Lines int64
	// Events is the number of events enqueued.
	Events int64
	// BadLines is the number of lines skipped: not JSON, not an audit event, or too long.
	BadLines int64
	// DroppedEvents is the number of events dropped for a timestamp outside the representable
	// range or too far in the future (see aggregator.CheckTime).
	DroppedEvents int64
}

// ReplayFile reads the audit log at path, as kube-apiserver writes it with --audit-log-path and
// --audit-log-format=json (one audit.k8s.io/v1 Event per line; a line may also hold a whole
// EventList, as the webhook receives them), and enqueues its events for cluster in batches. A
// gzip-compressed file is decompressed. Bad lines are counted, logged (rate-limited) and skipped.
// Events with a timestamp that aggregator.CheckTime refuses (outside the years 1678 to 2261, or more than
// aggregator.DefaultMaxFutureSkew ahead of the clock) are dropped, counted
// (kelemetry.audit.file.dropped_events, by reason) and logged (rate-limited) with the line and the
// field. It returns when the file is read, or with an error when the file cannot be read or q
// refuses a batch (e.g. because ctx expired).
func ReplayFile(ctx context.Context, path, cluster string, q interface {
	EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error
}, ts telemetry.Settings) (ReplayStats, error) {
	return replayFile(ctx, path, cluster, 0, q, ts, nil)
}

// replayFile is ReplayFile with a maximum future skew (zero: the default, negative: none).
// t, when not nil, follows the bytes read and the statistics so far (every reportLines lines).
func replayFile(ctx context.Context, path, cluster string, maxFutureSkew time.Duration, q queue.WaitEnqueuer, ts telemetry.Settings, t *replay.Tracker[ReplayStats]) (ReplayStats, error) {
	b := newLineBatcher(path, cluster, q, ts.Log().With("component", "audit.replay", "path", path))
	b.maxFutureSkew = skewOrDefault(maxFutureSkew)
	b.droppedCounter = newDroppedFileCounter(instrument.NewMeter(ts, meterName))
	f, err := os.Open(path)
	if err != nil {
		return b.stats, fmt.Errorf("replay audit log: %w", err)
	}
	defer f.Close()

	br := bufio.NewReaderSize(t.Reader(f), readBufferSize)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return b.stats, fmt.Errorf("replay audit log %s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}

	lr := newLineReader(r)
	for {
		line, tooLong, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return b.stats, fmt.Errorf("replay audit log %s: line %d: %w", path, b.lineNo+1, err)
		}
		if err := b.line(ctx, line, tooLong); err != nil {
			return b.stats, err
		}
		if b.lineNo%reportLines == 0 {
			t.Report(b.stats)
		}
	}
	// The last line may lack its newline.
	if line, tooLong, ok := lr.rest(); ok {
		if err := b.line(ctx, line, tooLong); err != nil {
			return b.stats, err
		}
	}
	if err := b.flush(ctx); err != nil {
		return b.stats, err
	}
	b.logSuppressed()
	return b.stats, nil
}

// FollowConfig configures a Follower.
type FollowConfig struct {
	// Path is the audit log kube-apiserver writes (--audit-log-path). Required.
	Path string `yaml:"path"`
	// Cluster is the name of the cluster the log comes from.
	Cluster string `yaml:"cluster"`
	// PollInterval is how often the file is checked for new lines, rotation and truncation
	// (default 250ms).
	PollInterval time.Duration `yaml:"pollInterval"`
	// StartAtEnd skips what the file holds when the follower starts, if it exists then; files
	// found later (after a rotation, or a file that did not exist yet) are read from their start.
	StartAtEnd bool `yaml:"startAtEnd"`
	// MaxFutureSkew is how far ahead of this receiver's clock an event's timestamps may be
	// (default aggregator.DefaultMaxFutureSkew; negative: no limit). Events beyond it, or outside
	// the representable range, are dropped and counted. New sets it from audit.maxFutureSkew.
	MaxFutureSkew time.Duration `yaml:"maxFutureSkew"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c FollowConfig) withDefaults() FollowConfig {
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	c.MaxFutureSkew = skewOrDefault(c.MaxFutureSkew)
	return c
}

// Validate reports a configuration that cannot work.
func (c FollowConfig) Validate() error {
	if c.Path == "" {
		return errors.New("audit log follower: no path")
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("audit log follower: negative poll interval %s", c.PollInterval)
	}
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			return fmt.Errorf("audit log follower: %w", err)
		}
	}
	return nil
}

// Follower follows an audit log like `tail -F`, enqueuing the events of new lines. It polls the
// file (no inotify) and
//   - waits for a file that does not exist yet;
//   - holds a partial last line until its newline arrives;
//   - survives rotation by rename (kube-apiserver's rotation renames audit.log to
//     audit-<time>.log and creates a new audit.log): it reads the rest of the old file, then
//     switches to the new one and reads it from its start;
//   - survives truncation in place (copytruncate) by reading again from the start. Lines written
//     between its last read and the truncation are lost, as with tail, and a truncation followed
//     by rewriting past the old size within one poll interval goes unnoticed.
//
// It keeps no checkpoint: after a restart it reads the file again from its start (or its end with
// StartAtEnd). Span IDs are deterministic, so replaying twice yields the same spans.
type Follower struct {
	cfg      FollowConfig
	q        queue.WaitEnqueuer
	logger   *slog.Logger
	lines    metric.Int64Counter
	badLines metric.Int64Counter
	dropped  metric.Int64Counter

	mu       sync.Mutex
	started  bool
	stopped  bool
	quit     chan struct{} // closed by Stop: finish the current batch and exit
	cancel   context.CancelFunc
	running  sync.WaitGroup // the follow goroutine
	stopOnce sync.Once
}

// NewFollower returns a follower that enqueues into q; ts gives its logger and meter provider
// (either may be unset).
func NewFollower(cfg FollowConfig, q interface {
	EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error
}, ts telemetry.Settings) (*Follower, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if q == nil {
		return nil, errors.New("audit log follower: nil queue")
	}
	fl := &Follower{
		cfg:    cfg.withDefaults(),
		q:      q,
		logger: ts.Log().With("component", "audit.follow", "path", cfg.Path),
		quit:   make(chan struct{}),
	}
	meter := instrument.NewMeter(ts, meterName)
	fl.lines = meter.Counter("kelemetry.audit.file.lines", "Non-empty audit log lines read.", "{line}", *attribute.EmptySet())
	fl.badLines = meter.Counter("kelemetry.audit.file.bad_lines",
		"Audit log lines skipped because they are not audit events or are too long.", "{line}", *attribute.EmptySet())
	fl.dropped = newDroppedFileCounter(meter)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("audit log follower: %w", err)
	}
	return fl, nil
}

// Start starts following in a goroutine. It does not block.
func (fl *Follower) Start(_ context.Context) error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	switch {
	case fl.stopped:
		return errors.New("start audit log follower: stopped")
	case fl.started:
		return errors.New("start audit log follower: already started")
	}
	fl.started = true
	runCtx, cancel := context.WithCancel(context.Background())
	fl.cancel = cancel
	fl.running.Go(func() { fl.run(runCtx) })
	return nil
}

// Stop asks the follower to hand over the batch it is reading and exit, and waits for it. If ctx
// expires first, the batch is abandoned; Stop still waits for the goroutine, which then exits
// promptly, and returns ctx's error. Stop is safe without Start and may be called more than once.
func (fl *Follower) Stop(ctx context.Context) error {
	fl.mu.Lock()
	fl.stopped = true
	started := fl.started
	fl.mu.Unlock()
	if !started {
		return nil
	}
	fl.stopOnce.Do(func() { close(fl.quit) })
	// The goroutine hands over its batch with its context live; only when ctx ends first is that
	// context cancelled, and then the goroutine exits promptly.
	err := loop.Wait(ctx, &fl.running, "audit log follower")
	fl.cancel()
	if err != nil {
		fl.running.Wait()
		return fmt.Errorf("stop audit log follower: %w", ctx.Err())
	}
	return nil
}

// errQuit ends the follow loop after Stop.
var errQuit = errors.New("follower stopped")

// followed is the file being read.
type followed struct {
	f    *os.File
	info os.FileInfo // of the handle when opened, compared with the path's to detect rotation
	lr   *lineReader
}

func (fl *Follower) run(ctx context.Context) {
	b := newLineBatcher(fl.cfg.Path, fl.cfg.Cluster, fl.q, fl.logger)
	b.linesCounter, b.badCounter, b.droppedCounter = fl.lines, fl.badLines, fl.dropped
	b.maxFutureSkew = fl.cfg.MaxFutureSkew
	b.quit = fl.quit

	var cur *followed
	defer func() {
		if cur != nil {
			_ = cur.f.Close()
		}
	}()
	openLimiter := ratelog.Limiter{Burst: 1, Every: time.Minute}
	first := true
	ticker := time.NewTicker(fl.cfg.PollInterval)
	defer ticker.Stop()
	for {
		if cur == nil {
			var err error
			cur, err = fl.open(first)
			first = false
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				if ok, suppressed := openLimiter.Allow(time.Now()); ok {
					fl.logger.Warn("open audit log", "error", err, "suppressed", suppressed)
				}
			}
			if cur != nil {
				b.lineNo = 0
			}
		}
		if cur != nil {
			next, err := fl.poll(ctx, cur, b)
			if err != nil {
				if !errors.Is(err, errQuit) && ctx.Err() == nil {
					fl.logger.Error("stop following audit log", "error", err)
				}
				b.logSuppressed()
				return
			}
			if next != cur {
				// Rotated: read the new file at once.
				cur = next
				if cur != nil {
					b.lineNo = 0
				}
				continue
			}
		}
		select {
		case <-fl.quit:
			b.logSuppressed()
			return
		case <-ticker.C:
		}
	}
}

// open opens the path. At the first attempt with StartAtEnd it skips what the file holds, up to
// and including a partial last line.
func (fl *Follower) open(first bool) (*followed, error) {
	f, err := os.Open(fl.cfg.Path)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	cur := &followed{f: f, info: info, lr: newLineReader(f)}
	if first && fl.cfg.StartAtEnd && info.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], info.Size()-1); err != nil {
			_ = f.Close()
			return nil, err
		}
		if _, err := f.Seek(info.Size(), io.SeekStart); err != nil {
			_ = f.Close()
			return nil, err
		}
		cur.lr.discard = last[0] != '\n'
	}
	return cur, nil
}

// poll reads the complete lines available, then checks the path for rotation and truncation. It
// returns the file to read next: cur, a new file after a rotation, or nil if the new file is not
// there yet.
func (fl *Follower) poll(ctx context.Context, cur *followed, b *lineBatcher) (*followed, error) {
	if err := readAvailable(ctx, cur.lr, b); err != nil {
		return cur, err
	}
	pathInfo, err := os.Stat(fl.cfg.Path)
	if err != nil {
		// Renamed away and not yet recreated: keep the old handle, which may still grow.
		return cur, nil //nolint:nilerr // not an error of this read: the path is checked again next poll
	}
	if !os.SameFile(cur.info, pathInfo) {
		// Rotated. Read what was written to the old file before the switch, then its last line
		// even without a newline: nobody will complete it.
		if err := readAvailable(ctx, cur.lr, b); err != nil {
			return cur, err
		}
		if line, tooLong, ok := cur.lr.rest(); ok {
			if err := b.line(ctx, line, tooLong); err != nil {
				return cur, err
			}
		}
		if err := b.flush(ctx); err != nil {
			return cur, err
		}
		_ = cur.f.Close()
		fl.logger.Info("audit log rotated: following the new file", "linesInOldFile", b.lineNo)
		next, err := fl.open(false)
		if err != nil {
			return nil, nil //nolint:nilerr // the new file may not be there yet; run retries
		}
		return next, nil
	}
	info, err := cur.f.Stat()
	if err != nil {
		return cur, fmt.Errorf("stat audit log: %w", err)
	}
	pos, err := cur.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return cur, fmt.Errorf("seek audit log: %w", err)
	}
	if info.Size() < pos {
		// Truncated in place (copytruncate): start again from the beginning. A partial line held
		// from before belongs to the old content.
		if _, err := cur.f.Seek(0, io.SeekStart); err != nil {
			return cur, fmt.Errorf("seek audit log: %w", err)
		}
		if _, tooLong, ok := cur.lr.rest(); ok || tooLong {
			b.bad(errors.New("partial line lost to truncation"))
		}
		cur.lr.reset(cur.f)
		fl.logger.Info("audit log truncated: reading it from the start", "linesBefore", b.lineNo)
		b.lineNo = 0
		if err := readAvailable(ctx, cur.lr, b); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

// readAvailable hands every complete line available to b, then flushes b so that nothing waits
// for more input.
func readAvailable(ctx context.Context, lr *lineReader, b *lineBatcher) error {
	for {
		line, tooLong, err := lr.next()
		if errors.Is(err, io.EOF) {
			return b.flush(ctx)
		}
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		if err := b.line(ctx, line, tooLong); err != nil {
			return err
		}
	}
}

// lineBatcher decodes lines and enqueues their events in batches.
type lineBatcher struct {
	path    string
	cluster string
	q       queue.WaitEnqueuer
	logger  *slog.Logger
	batch   []*auditv1.Event
	lineNo  int64
	stats   ReplayStats
	badLog  ratelog.Limiter
	quit    <-chan struct{} // when closed, flush returns errQuit after enqueuing

	linesCounter, badCounter metric.Int64Counter // nil for ReplayFile
	droppedCounter           metric.Int64Counter
	maxFutureSkew            time.Duration
}

func newLineBatcher(path, cluster string, q queue.WaitEnqueuer, logger *slog.Logger) *lineBatcher {
	return &lineBatcher{
		path:    path,
		cluster: cluster,
		q:       q,
		logger:  logger,
		batch:   make([]*auditv1.Event, 0, replayBatchSize),
		badLog:  ratelog.Limiter{Burst: 10, Every: 10 * time.Second},
	}
}

// line handles one line (without its newline); tooLong says it was skipped for its length.
func (b *lineBatcher) line(ctx context.Context, line []byte, tooLong bool) error {
	b.lineNo++
	line = bytes.TrimSpace(line)
	if len(line) == 0 && !tooLong {
		return nil
	}
	b.stats.Lines++
	if b.linesCounter != nil {
		b.linesCounter.Add(ctx, 1)
	}
	if tooLong {
		b.bad(fmt.Errorf("line longer than %d bytes", maxLineSize))
		return nil
	}
	// The decoded events alias the bytes they were decoded from, and line is only valid until the
	// next read: decode a copy.
	events, err := decodeLogLine(bytes.Clone(line))
	if err != nil {
		b.bad(err)
		return nil
	}
	events = b.checkTimes(ctx, events)
	b.batch = append(b.batch, events...)
	if len(b.batch) >= replayBatchSize {
		return b.flush(ctx)
	}
	return nil
}

// checkTimes drops, counts and logs (rate-limited) the events of a line whose timestamps
// aggregator.CheckTime refuses.
func (b *lineBatcher) checkTimes(ctx context.Context, events []*auditv1.Event) []*auditv1.Event {
	single := len(events) == 1
	kept, problems := timecheck.FilterEventTimes(events, time.Now(), b.maxFutureSkew, func(i int) string {
		if single {
			return ""
		}
		return "items[" + strconv.Itoa(i) + "]."
	})
	for _, p := range problems {
		b.stats.DroppedEvents++
		if b.droppedCounter != nil {
			b.droppedCounter.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", p.Reason)))
		}
		if ok, suppressed := b.badLog.Allow(time.Now()); ok {
			b.logger.Warn("drop audit event with a bad timestamp",
				"error", "line "+strconv.FormatInt(b.lineNo, 10)+": "+p.Message, "suppressedSinceLastLog", suppressed)
		}
	}
	return kept
}

// skewOrDefault is maxFutureSkew, or aggregator.DefaultMaxFutureSkew for zero.
func skewOrDefault(maxFutureSkew time.Duration) time.Duration {
	if maxFutureSkew == 0 {
		return timecheck.DefaultMaxFutureSkew
	}
	return maxFutureSkew
}

// newDroppedFileCounter creates the counter of events dropped from log files for their timestamps.
func newDroppedFileCounter(m *instrument.Meter) metric.Int64Counter {
	return m.Counter("kelemetry.audit.file.dropped_events",
		"Audit log events dropped for their timestamps, by reason (unrepresentable_time, future_time).", "{event}",
		instrument.Sets("reason", timecheck.TimeReasonUnrepresentable, timecheck.TimeReasonFuture)...)
}

// decodeLogLine decodes one audit log line: an Event, or an EventList as webhook bodies are. The
// events alias line, which must not be reused.
func decodeLogLine(line []byte) ([]*auditv1.Event, error) {
	ev, err := auditv1.DecodeEvent(line)
	if err != nil {
		// Rarely, a line holds a whole EventList (a saved webhook body).
		if bytes.Contains(line, []byte(`"EventList"`)) {
			if events, lerr := auditv1.DecodeEventList(line); lerr == nil {
				return events, nil
			}
		}
		return nil, err
	}
	if ev.AuditID == "" {
		return nil, errors.New("not an audit event: no auditID")
	}
	return []*auditv1.Event{ev}, nil
}

func (b *lineBatcher) bad(err error) {
	b.stats.BadLines++
	if b.badCounter != nil {
		b.badCounter.Add(context.Background(), 1)
	}
	if ok, suppressed := b.badLog.Allow(time.Now()); ok {
		b.logger.Warn("skip bad audit log line", "line", b.lineNo, "error", err, "suppressedSinceLastLog", suppressed)
	}
}

// logSuppressed reports bad lines whose logs were suppressed since the last one.
func (b *lineBatcher) logSuppressed() {
	if n := b.badLog.TakeSuppressed(); n > 0 {
		b.logger.Warn("skipped more bad audit log lines", "count", n, "lastLine", b.lineNo)
	}
}

// flush enqueues the batch. After the follower's Stop it returns errQuit once the batch is handed
// over.
func (b *lineBatcher) flush(ctx context.Context) error {
	if len(b.batch) > 0 {
		err := b.q.EnqueueWait(ctx, b.cluster, b.batch)
		if errors.Is(err, queue.ErrBatchTooLarge) {
			// The queue is smaller than a batch: hand the events over one by one.
			for i, ev := range b.batch {
				if err = b.q.EnqueueWait(ctx, b.cluster, []*auditv1.Event{ev}); err != nil {
					b.stats.Events += int64(i)
					break
				}
			}
		}
		if err != nil {
			return fmt.Errorf("enqueue events of audit log %s: %w", b.path, err)
		}
		b.stats.Events += int64(len(b.batch))
		// A new slice: the queue may keep the one it was given.
		b.batch = make([]*auditv1.Event, 0, replayBatchSize)
	}
	if b.quit != nil {
		select {
		case <-b.quit:
			return errQuit
		default:
		}
	}
	return nil
}

// lineReader splits input into lines of at most maxLineSize bytes. After io.EOF it can be called
// again when the input has grown: a partial last line is kept until its newline arrives.
type lineReader struct {
	r       *bufio.Reader
	partial []byte
	used    bool // partial was returned as a line: clear it on the next call
	tooLong bool // the current line passed MaxLineSize: skip to its newline
	discard bool // skip to the next newline silently (the tail of a line started before)
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize)}
}

// reset drops any state and reads from r.
func (l *lineReader) reset(r io.Reader) {
	l.r.Reset(r)
	l.partial, l.used, l.tooLong, l.discard = l.partial[:0], false, false, false
}

// next returns the next complete line without its line ending, valid until the next call, or
// tooLong for a line that was too long and skipped. It returns io.EOF when no complete line is
// available.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	if l.used {
		l.clearPartial()
	}
	for {
		chunk, err := l.r.ReadSlice('\n')
		if err == nil {
			switch {
			case l.discard:
				l.discard = false
				continue
			case l.tooLong:
				l.tooLong = false
				l.clearPartial()
				return nil, true, nil
			case len(l.partial) == 0:
				line = chunk
			default:
				l.partial = append(l.partial, chunk...)
				l.used = true
				line = l.partial
			}
			line = line[:len(line)-1]
			if len(line) > maxLineSize {
				l.clearPartial()
				return nil, true, nil
			}
			return line, false, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		if !l.discard && !l.tooLong {
			if len(l.partial)+len(chunk) > maxLineSize {
				l.tooLong = true
				l.clearPartial()
			} else {
				l.partial = append(l.partial, chunk...)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil, false, io.EOF
		}
	}
}

// rest returns the partial last line held at the end of the input, if any, and forgets it.
func (l *lineReader) rest() (line []byte, tooLong bool, ok bool) {
	if l.used {
		l.clearPartial()
	}
	switch {
	case l.discard:
		l.discard = false
		l.clearPartial()
		return nil, false, false
	case l.tooLong:
		l.tooLong = false
		l.clearPartial()
		return nil, true, true
	case len(l.partial) > 0:
		l.used = true
		return l.partial, false, true
	}
	return nil, false, false
}

func (l *lineReader) clearPartial() {
	l.used = false
	if cap(l.partial) > 1<<20 {
		l.partial = nil // do not keep a huge buffer for one huge line
		return
	}
	l.partial = l.partial[:0]
}

// Replayer ingests audit log files once, in the background, each file flushed through the queue
// before it counts as done.
type Replayer = replay.Runner[ReplayStats]

// NewReplayer replays files into q, as cluster, dropping events with timestamps more than
// maxFutureSkew ahead (zero: aggregator.DefaultMaxFutureSkew, negative: no limit) or outside the
// representable range (see ReplayFile); ts gives its logger (may be unset).
func NewReplayer(files []string, cluster string, maxFutureSkew time.Duration, q queue.Target, ts telemetry.Settings) *Replayer {
	return replay.New("audit replay", files, func(ctx context.Context, file string, t *replay.Tracker[ReplayStats]) (ReplayStats, error) {
		st, err := replayFile(ctx, file, cluster, maxFutureSkew, q, ts, t)
		if err == nil {
			// Let everything read reach the sinks before the file counts as done.
			err = q.Flush(ctx)
		}
		return st, err
	}, ts.Log())
}

// meterName is the instrumentation scope of the log readers' metrics (the audit pipeline's).
const meterName = "github.com/kelemetry/kelemetry/audit"
