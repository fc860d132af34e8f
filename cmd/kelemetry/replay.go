package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"golang.org/x/term"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/replay"
	"github.com/kelemetry/kelemetry/telemetry"
)

// replayOptions are the replay command's own flags.
type replayOptions struct {
	to          string
	tokenFile   string
	caFile      string
	batchEvents int
	every       time.Duration
}

// newReplayCommand builds `kelemetry replay FILE...`: audit logs into the configured store and
// exit, or posted to a running webhook with --to.
func newReplayCommand(ctx context.Context, build func(validate bool) (kelemetry.Config, slog.Level, error), stdout, stderr io.Writer) *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay FILE...",
		Short: "Ingest audit log files (JSON lines, .gz too) into the store, or post them to a running webhook (--to), and exit",
		Long: "replay reads audit log files as kube-apiserver writes them (--audit-log-format=json; .gz too).\n" +
			"Without --to it runs the ingest side on the configuration (--config, --data-dir, ...) until\n" +
			"every event of the files is in the store, then exits: the data folder is then ready for\n" +
			"`kelemetry serve`. With --to it posts the events in batches to a running audit webhook,\n" +
			"retrying the batches it answers 429 or 503. Progress goes to stderr: a bar on a terminal,\n" +
			"a line every --progress-every otherwise.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			var named kelemetry.Config
			named.Audit.Replay = files
			if err := checkFiles(named); err != nil {
				return err
			}
			p := newProgress(stderr, o.every, len(files))
			if o.to != "" {
				return postFiles(ctx, files, o, p, stdout)
			}
			cfg, level, err := build(true)
			if err != nil {
				return err
			}
			return replayIntoStore(ctx, cfg, level, files, p, stdout, stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.to, "to", "", "post the events to this running audit webhook URL (https://kelemetry:8080/audit/{cluster}) instead of ingesting them here")
	fs.StringVar(&o.tokenFile, "to-token-file", "", "with --to: file holding the bearer token the webhook accepts")
	fs.StringVar(&o.caFile, "to-ca-file", "", "with --to: PEM CA bundle that verifies the webhook's certificate")
	fs.IntVar(&o.batchEvents, "batch-events", 500, "with --to: events per posted batch (at most)")
	fs.DurationVar(&o.every, "progress-every", 5*time.Second, "when stderr is not a terminal: how often a progress line is printed")
	annotateSections(fs)
	return cmd
}

// replayIntoStore runs the ingest side with files as its start-up replay, waits until everything
// read is in the sinks, and stops.
func replayIntoStore(ctx context.Context, cfg kelemetry.Config, level slog.Level, files []string, p *progress, stdout, stderr io.Writer) error {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: max(level, slog.LevelWarn)}))
	telemetry.RouteKlog(logger)
	cfg.Audit.Replay = files
	cfg.Audit.Follow = nil
	cfg.Event.Watch = false
	cfg.Role = kelemetry.RoleIngest
	cfg.AuditAddr, cfg.HTTPAddr, cfg.RemoteStorageAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	if err := cfg.Validate(); err != nil {
		return err
	}
	if inMemory(cfg) {
		return errors.New("replay: the store is in memory (no --data-dir, no dataDir): the traces would be lost at exit; give a data folder, or post to a running webhook with --to")
	}
	var (
		rep *auditlog.Replayer
		q   queue.Queue
		agg *aggregator.Engine
	)
	app := newApp(cfg, logger, fx.Populate(&rep, &q, &agg))
	if err := app.Err(); err != nil {
		return startError(logger, err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := app.Start(startCtx); err != nil {
		return startError(logger, err)
	}
	start := time.Now()
	waitErr := func() error {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			st, _ := rep.Status()
			p.show(st)
			select {
			case <-rep.Done():
				if q.Len() == 0 && agg.LinkJobs() == 0 {
					return nil
				}
			default:
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}()
	st, replayErr := rep.Status()
	p.finish(st)
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStop()
	stopErr := app.Stop(stopCtx)
	if err := errors.Join(waitErr, replayErr, stopErr); err != nil {
		return err
	}
	var events, bad, dropped int64
	for _, f := range st {
		events, bad, dropped = events+f.Stats.Events, bad+f.Stats.BadLines, dropped+f.Stats.DroppedEvents
	}
	_, err := fmt.Fprintf(stdout, "replayed %d events from %d files into %s in %s (%s events/s); %d bad lines, %d events dropped for their timestamps\n",
		events, len(st), cfg.WithDefaults().Store.Dir, time.Since(start).Round(time.Millisecond), rate(events, time.Since(start)), bad, dropped)
	return err
}

// progress prints where a replay stands on stderr: one line rewritten in place on a terminal,
// a line every interval otherwise.
type progress struct {
	files    int // how many files the replay reads
	w        io.Writer
	terminal bool
	every    time.Duration
	last     time.Time
	width    int
}

func newProgress(w io.Writer, every time.Duration, files int) *progress {
	p := &progress{w: w, every: every, files: files}
	if f, ok := w.(*os.File); ok {
		p.terminal = term.IsTerminal(int(f.Fd()))
	}
	return p
}

// progressLine renders the progress of the file being read (or the last one) of files.
func progressLine(st []replay.Progress[auditlog.ReplayStats], files int) string {
	if len(st) == 0 {
		return "replay: starting"
	}
	cur := st[len(st)-1]
	var events int64
	var elapsed time.Duration
	for _, f := range st {
		events += f.Stats.Events
		elapsed += f.Elapsed
	}
	pct := 100.0
	if cur.BytesTotal > 0 {
		pct = 100 * float64(cur.BytesRead) / float64(cur.BytesTotal)
	}
	bar := strings.Repeat("=", int(pct/5)) + strings.Repeat(" ", 20-int(pct/5))
	return fmt.Sprintf("replay %d/%d %s [%s] %3.0f%% %s/%s, %d events, %s events/s",
		len(st), files, cur.File, bar, pct, mib(cur.BytesRead), mib(cur.BytesTotal), events, rate(events, elapsed))
}

func (p *progress) show(st []replay.Progress[auditlog.ReplayStats]) {
	now := time.Now()
	if p.terminal {
		line := progressLine(st, p.files)
		pad := max(0, p.width-len(line))
		p.width = len(line)
		fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
		return
	}
	if p.last.IsZero() || now.Sub(p.last) >= p.every {
		p.last = now
		fmt.Fprintln(p.w, progressLine(st, p.files))
	}
}

func (p *progress) finish(st []replay.Progress[auditlog.ReplayStats]) {
	if p.terminal {
		fmt.Fprint(p.w, "\r"+progressLine(st, p.files)+"\n")
		return
	}
	fmt.Fprintln(p.w, progressLine(st, p.files))
}

func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

func rate(events int64, d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(events)/d.Seconds(), 'f', 0, 64)
}

// postFiles posts the events of files to the webhook o.to in batches of at most o.batchEvents.
func postFiles(ctx context.Context, files []string, o replayOptions, p *progress, stdout io.Writer) error {
	client, token, err := webhookClient(o)
	if err != nil {
		return err
	}
	start := time.Now()
	var done []replay.Progress[auditlog.ReplayStats]
	var total int64
	for _, file := range files {
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("replay %s: %w", file, err)
		}
		cur := replay.Progress[auditlog.ReplayStats]{File: file, BytesTotal: fi.Size()}
		fileStart := time.Now()
		err = readLogBatches(file, o.batchEvents, &cur.BytesRead, func(batch []byte, events int) error {
			if err := postBatch(ctx, client, o.to, token, batch); err != nil {
				return err
			}
			cur.Stats.Events += int64(events)
			cur.Elapsed = time.Since(fileStart)
			p.show(append(done, cur))
			return nil
		}, func() { cur.Stats.BadLines++ })
		if err != nil {
			p.finish(append(done, cur))
			return fmt.Errorf("replay %s: %w", file, err)
		}
		cur.Done, cur.Elapsed = true, time.Since(fileStart)
		done = append(done, cur)
		total += cur.Stats.Events
	}
	p.finish(done)
	var bad int64
	for _, f := range done {
		bad += f.Stats.BadLines
	}
	_, err = fmt.Fprintf(stdout, "posted %d events from %d files to %s in %s (%s events/s); %d bad lines skipped\n",
		total, len(files), o.to, time.Since(start).Round(time.Millisecond), rate(total, time.Since(start)), bad)
	return err
}

// webhookClient returns the HTTP client and bearer token of --to.
func webhookClient(o replayOptions) (*http.Client, string, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, "", fmt.Errorf("--to-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("--to-ca-file %s: no PEM certificate in it", o.caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var token string
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, "", fmt.Errorf("--to-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}, token, nil
}

// readLogBatches reads the audit log file (one Event, or one EventList, a line; gzip too) and calls
// post with EventList batches of at most n events. read counts the file's bytes read; bad is
// called for each line that is not a JSON object.
func readLogBatches(file string, n int, read *int64, post func(batch []byte, events int) error, bad func()) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(&countReader{r: f, n: read}, 64<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var batch bytes.Buffer
	events := 0
	flush := func() error {
		if events == 0 {
			return nil
		}
		batch.WriteString("]}")
		err := post(batch.Bytes(), events)
		batch.Reset()
		events = 0
		return err
	}
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			bad()
			continue
		}
		if bytes.Contains(line[:min(len(line), 64)], []byte(`"kind":"EventList"`)) {
			// A whole batch on one line, as a webhook dump or --audit-dump writes it.
			list, err := auditv1.DecodeEventList(line)
			if err != nil {
				bad()
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if err := post(line, len(list)); err != nil {
				return err
			}
			continue
		}
		if _, err := auditv1.DecodeEvent(line); err != nil {
			bad()
			continue
		}
		if events == 0 {
			batch.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`)
		} else {
			batch.WriteByte(',')
		}
		batch.Write(line)
		events++
		if events >= n || batch.Len() >= 3<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return flush()
}

type countReader struct {
	r io.Reader
	n *int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// postBatch posts one batch, waiting out 429 and 503 answers (Retry-After, else a growing
// backoff) and connection errors, at most 10 times; another answer is an error with the
// webhook's reason.
func postBatch(ctx context.Context, client *http.Client, url, token string, batch []byte) error {
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(batch))
		if err != nil {
			return fmt.Errorf("--to %s: %w", url, err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		retry := err != nil
		var reason string
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			reason = strings.TrimSpace(string(body))
			switch {
			case resp.StatusCode/100 == 2:
				return nil
			case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusServiceUnavailable:
				retry = true
				if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
					wait = time.Duration(s) * time.Second
				}
			default:
				return fmt.Errorf("the webhook answered %s: %s", resp.Status, reason)
			}
		}
		if !retry || attempt >= 10 {
			if err != nil {
				return fmt.Errorf("post to %s: %w", url, err)
			}
			return fmt.Errorf("the webhook kept refusing the batch (%d attempts): %s", attempt, reason)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}
