// Command curves measures how the all-in-one's costs grow with what its store holds, for
// scripts/bench.sh (KELEMETRY_BENCH_CURVES=1) and docs/performance.md:
//
//   - ingest: the CPU time per distinct audit event (examples/auditload --distinct, the bulk
//     fixture) of a process whose embedded store already holds 0, 1, 5 and 10 million spans;
//   - queries: the time of GET /api/traces for a Deployment with 1,000 Pods and one with 10,000
//     Pods (tracing, full tree, four windows), drawn whole, with the same stores;
//   - the same queries through the Jaeger-backed reader (--store-backend jaeger over Jaeger on
//     Badger, jaeger.storage.v2), with Jaeger holding the same spans.
//
// The stored spans are a busy cluster's writes over the last day (internal/benchdata.Writes:
// 20,000 Pods, each write with its diff), written straight into the store between the
// measurements (into Jaeger over OTLP). It prints Markdown tables and writes an SVG picture of the
// curves (--svg).
//
//	go run ./internal/tools/curves --kelemetry BIN --auditload BIN [--jaeger BIN] [--svg FILE] FIXTURE
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "curves:", err)
		os.Exit(1)
	}
}

type options struct {
	kelemetry, auditload, jaeger  string
	jaegerTemplate, jaegerResults string
	fromResults                   string
	fixture, work, svg            string
	copies, runs                  int
	points, jaegerPoints          []int
	trees                         []int
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("curves", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.kelemetry, "kelemetry", "", "the all-in-one binary (required)")
	fs.StringVar(&o.auditload, "auditload", "", "the examples/auditload binary (required)")
	fs.StringVar(&o.jaeger, "jaeger", "", "the Jaeger binary; without it the Jaeger curve is left out")
	fs.StringVar(&o.jaegerTemplate, "jaeger-config", "testdata/jaeger/badger-backend.yaml", "the template of Jaeger's configuration on Badger")
	fs.StringVar(&o.jaegerResults, "jaeger-results", "", "draw the Jaeger curve from this file (a JSON list of points, as results.json's \"jaeger\") instead of measuring it")
	fs.StringVar(&o.fromResults, "from-results", "", "measure nothing: print the tables and draw the picture of an earlier run's results.json")
	fs.StringVar(&o.work, "work", "", "folder for the stores (default: a new temporary folder, removed at the end)")
	fs.StringVar(&o.svg, "svg", "", "write the picture of the curves to this file")
	fs.IntVar(&o.copies, "copies", 3, "distinct copies of the fixture posted per ingest measurement")
	fs.IntVar(&o.runs, "runs", 5, "rounds of the embedded store's measurements: each round measures every point once, in turn, on a fresh copy of its store (the medians are kept)")
	points := fs.String("points", "0,1000000,5000000,10000000", "spans stored at the embedded store's points")
	jpoints := fs.String("jaeger-points", "0,1000000,10000000", "spans stored at Jaeger's points")
	trees := fs.String("trees", "1000,10000", "Pods of the Deployment trees queried")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("flags: %w", err)
	}
	if o.fromResults == "" && (o.kelemetry == "" || o.auditload == "" || fs.NArg() != 1) {
		return o, errors.New("need --kelemetry, --auditload and one fixture file (or --from-results)")
	}
	o.fixture = fs.Arg(0)
	var err error
	if o.points, err = ints(*points); err != nil {
		return o, fmt.Errorf("--points: %w", err)
	}
	if o.jaegerPoints, err = ints(*jpoints); err != nil {
		return o, fmt.Errorf("--jaeger-points: %w", err)
	}
	if o.trees, err = ints(*trees); err != nil {
		return o, fmt.Errorf("--trees: %w", err)
	}
	if o.copies < 1 || o.runs < 1 {
		return o, errors.New("--copies and --runs must be at least 1")
	}
	return o, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// ints parses an increasing comma-separated list of counts.
func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%q is not an increasing list of counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// point is what was measured with stored spans in the store.
type point struct {
	stored  int
	evPerS  float64         // distinct events per CPU-second (median); 0: not measured
	queries []time.Duration // per tree: the median query time
	slowest []time.Duration // per tree: the slowest query
	// queryRSS is the peak RSS (bytes) of the process that answered the queries, read after
	// them and before any ingest: what a query replica needs for these trees. 0: not measured.
	queryRSS int64
}

// pointJSON is a point in results files (--jaeger-results, and the work folder's results.json).
type pointJSON struct {
	Stored    int       `json:"stored"`
	EvPerS    float64   `json:"eventsPerCPUSecond,omitempty"`
	QueriesMS []float64 `json:"queriesMs"`
	SlowestMS []float64 `json:"slowestMs"`
	QueryRSS  int64     `json:"queryPeakRssBytes,omitempty"`
}

func toJSON(ps []point) []pointJSON {
	out := make([]pointJSON, 0, len(ps))
	for _, p := range ps {
		j := pointJSON{Stored: p.stored, EvPerS: p.evPerS, QueryRSS: p.queryRSS}
		for i := range p.queries {
			j.QueriesMS = append(j.QueriesMS, float64(p.queries[i])/float64(time.Millisecond))
			j.SlowestMS = append(j.SlowestMS, float64(p.slowest[i])/float64(time.Millisecond))
		}
		out = append(out, j)
	}
	return out
}

func fromJSON(js []pointJSON) []point {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	out := make([]point, 0, len(js))
	for _, j := range js {
		p := point{stored: j.Stored, evPerS: j.EvPerS, queryRSS: j.QueryRSS}
		for i := range j.QueriesMS {
			p.queries = append(p.queries, ms(j.QueriesMS[i]))
			p.slowest = append(p.slowest, ms(j.SlowestMS[i]))
		}
		out = append(out, p)
	}
	return out
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "kelemetry-curves-"); err != nil {
			return fmt.Errorf("work folder: %w", err)
		}
		defer os.RemoveAll(o.work)
	} else if err := os.MkdirAll(o.work, 0o755); err != nil {
		return fmt.Errorf("work folder: %w", err)
	}
	conf := filepath.Join(o.work, "kelemetry.yaml")
	// Room for the largest tree: every object of it, and the spans of four windows; and time for
	// Jaeger's answer, which takes 24 s and more for the 10,000-pod tree, near the default 30 s.
	most := slices.Max(o.trees)
	if err := os.WriteFile(conf, fmt.Appendf(nil, "query:\n  perLevel: %d\n  total: %d\n  maxSpans: %d\n  maxMemoryBytes: -1\n  timeout: 10m\n", 2*most, 2*most, 100*most), 0o600); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	now := time.Now().UTC()
	c := &curves{o: o, conf: conf, now: now, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	// A --work folder kept from an earlier run holds its stores: they are measured again (and
	// filled further) with that run's times.
	if b, err := os.ReadFile(filepath.Join(o.work, "stored.json")); err == nil {
		if err := json.Unmarshal(b, &c.kept); err != nil {
			return fmt.Errorf("stored.json: %w", err)
		}
		c.now = c.kept.Now
	}
	// The trees' four windows lie half a day back, among the day of stored writes.
	c.w0 = aggregator.WindowStart(c.now.Add(-12*time.Hour), aggregator.DefaultWindow)

	var embedded, jpoints []point
	if o.fromResults != "" {
		// Only the tables and the picture, of an earlier run's results.json.
		var r map[string][]pointJSON
		if err := readJSON(o.fromResults, &r); err != nil {
			return fmt.Errorf("--from-results: %w", err)
		}
		embedded, jpoints = fromJSON(r["embedded"]), fromJSON(r["jaeger"])
	} else {
		if embedded, err = c.embedded(ctx); err != nil {
			return err
		}
		switch {
		case o.jaegerResults != "":
			// The Jaeger curve of an earlier run (its results.json "jaeger", or points written by
			// hand from its log), drawn with this run's embedded curve.
			var js []pointJSON
			if err := readJSON(o.jaegerResults, &js); err != nil {
				return fmt.Errorf("--jaeger-results: %w", err)
			}
			jpoints = fromJSON(js)
		case o.jaeger != "":
			if jpoints, err = c.jaegerCurve(ctx); err != nil {
				return err
			}
		}
		b, err := json.MarshalIndent(map[string][]pointJSON{"embedded": toJSON(embedded), "jaeger": toJSON(jpoints)}, "", "  ")
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		if err := os.WriteFile(filepath.Join(o.work, "results.json"), b, 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
	}
	c.report(out, embedded, jpoints)
	if o.svg != "" {
		if err := os.WriteFile(o.svg, []byte(drawSVG(o.trees, embedded, jpoints)), 0o644); err != nil {
			return fmt.Errorf("svg: %w", err)
		}
	}
	return nil
}

type curves struct {
	o      options
	conf   string
	now    time.Time
	w0     time.Time
	logger *slog.Logger
	kept   kept // what the work folder's stores hold
}

// kept is what the stores of the work folder hold (stored.json), so that a later run with the same
// --work measures them again without filling them anew.
type kept struct {
	Now      time.Time `json:"now"`
	Embedded int       `json:"embedded"`
	Jaeger   int       `json:"jaeger"`
}

func (c *curves) saveKept() error {
	c.kept.Now = c.now
	b, err := json.Marshal(c.kept)
	if err != nil {
		return fmt.Errorf("stored.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.o.work, "stored.json"), b, 0o600); err != nil {
		return fmt.Errorf("stored.json: %w", err)
	}
	return nil
}

// fill writes the unrelated spans [from, to) of the day's writes, and the trees when from is 0
// (and to is not: a kept store at 0 spans holds the trees).
func (c *curves) fill(ctx context.Context, from, to int, export func(context.Context, []*aggregator.Span) error) error {
	if from == to && from > 0 {
		return nil
	}
	if from == 0 {
		for _, pods := range c.o.trees {
			for _, spans := range benchdata.Deployment("prod", "curve-"+strconv.Itoa(pods), pods, 4, c.w0) {
				for b := range slices.Chunk(spans, 5000) {
					if err := export(ctx, b); err != nil {
						return err
					}
				}
			}
		}
	}
	start := time.Now()
	err := benchdata.Writes(benchdata.WritesConfig{FirstIndex: from}, to-from, c.now.Add(-24*time.Hour), c.now.Add(-time.Minute),
		func(spans []*aggregator.Span) error { return export(ctx, spans) })
	if err != nil {
		return fmt.Errorf("store %d spans: %w", to-from, err)
	}
	fmt.Fprintf(os.Stderr, "curves: stored spans %d to %d in %s\n", from, to, time.Since(start).Round(time.Second))
	return nil
}

// embedded measures the embedded store's points. It fills the store point by point, keeping a
// copy of it at each (hard links: the store's tables and blob files never change once written),
// then measures in rounds: each round starts the all-in-one on a fresh copy of every point's
// store in turn (each round beginning one point further on), so that a slow spell of the
// machine falls on every point alike rather than on the last ones filled.
func (c *curves) embedded(ctx context.Context) ([]point, error) {
	dir := filepath.Join(c.o.work, "embedded")
	tel := telemetry.Settings{Logger: c.logger}
	var measured []int
	stored := c.kept.Embedded
	for _, n := range c.o.points {
		snap := c.snapshotDir(n)
		if _, err := os.Stat(snap); err == nil {
			measured = append(measured, n)
			continue
		}
		if n < stored {
			fmt.Fprintf(os.Stderr, "curves: the store holds %d spans and has no copy at %d: that point is left out\n", stored, n)
			continue
		}
		st, err := pebble.Open(ctx, pebble.Config{Dir: dir}, 0, tel)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		err = c.fill(ctx, stored, n, st.Export)
		if err == nil {
			err = st.Sync(ctx)
		}
		// The compactions the filling left run here, in this process, not in the measured one.
		waitIdle(ctx, os.Getpid(), 10*time.Minute)
		if serr := st.Stop(ctx); err == nil && serr != nil {
			err = serr
		}
		if err != nil {
			return nil, err
		}
		stored = n
		c.kept.Embedded = n
		if err := c.saveKept(); err != nil {
			return nil, err
		}
		// Made aside and renamed, so that a copy cut short is never taken for a whole one.
		part := snap + ".partial"
		_ = os.RemoveAll(part)
		if err := linkTree(dir, part); err != nil {
			return nil, fmt.Errorf("copy of the store at %d spans: %w", n, err)
		}
		if err := os.Rename(part, snap); err != nil {
			return nil, fmt.Errorf("copy of the store at %d spans: %w", n, err)
		}
		measured = append(measured, n)
	}
	trials := make([][]trial, len(measured))
	trialDir := filepath.Join(c.o.work, "trial")
	for r := range c.o.runs {
		for j := range measured {
			// Each round starts one point further on, so that no point is always measured right
			// after the same one.
			i := (j + r) % len(measured)
			n := measured[i]
			_ = os.RemoveAll(trialDir)
			if err := linkTree(c.snapshotDir(n), trialDir); err != nil {
				return nil, fmt.Errorf("copy of the store at %d spans: %w", n, err)
			}
			t, err := c.measure(ctx, n, true, 0, "--data-dir", trialDir)
			if err != nil {
				return nil, fmt.Errorf("%d spans stored, round %d: %w", n, r+1, err)
			}
			trials[i] = append(trials[i], t)
		}
	}
	_ = os.RemoveAll(trialDir)
	pts := make([]point, len(measured))
	for i, n := range measured {
		pts[i] = summarize(n, trials[i])
		fmt.Fprintf(os.Stderr, "curves: %s stored, %d rounds: %.0f events per CPU-second, trees %v (slowest %v), query process peak RSS %d MiB\n",
			millions(n), len(trials[i]), pts[i].evPerS, pts[i].queries, pts[i].slowest, pts[i].queryRSS>>20)
	}
	return pts, nil
}

// snapshotDir is the folder of the copy of the embedded store holding n spans.
func (c *curves) snapshotDir(n int) string {
	return filepath.Join(c.o.work, "points", strconv.Itoa(n))
}

// linkTree makes dst a copy of the store folder src: its tables and blob files hard-linked
// (Pebble never writes to one again, and deletes it by unlinking its name), every other file
// copied (the manifest and the write-ahead logs are appended to). The lock file and the
// all-in-one's audit queue are left out.
func linkTree(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "LOCK" {
			continue
		}
		from, to := filepath.Join(src, name), filepath.Join(dst, name)
		if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
			if err := os.Link(from, to); err != nil {
				return fmt.Errorf("link %s: %w", name, err)
			}
			continue
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return nil
}

// trial is what one start of the all-in-one measured.
type trial struct {
	times [][]time.Duration // per tree: the query times
	rss   int64             // peak RSS after the queries; 0: not read
	rate  float64           // distinct events per CPU-second; 0: not measured
}

// summarize makes the point of the trials with stored spans: per tree the median and the slowest
// of every query timed, the median ingest rate and the highest query RSS.
func summarize(stored int, trials []trial) point {
	p := point{stored: stored}
	var rates []float64
	for ti, t := range trials {
		for i, times := range t.times {
			if ti == 0 {
				p.queries = append(p.queries, 0)
				p.slowest = append(p.slowest, 0)
			}
			p.slowest[i] = max(p.slowest[i], slices.Max(times))
		}
		p.queryRSS = max(p.queryRSS, t.rss)
		if t.rate > 0 {
			rates = append(rates, t.rate)
		}
	}
	for i := range p.queries {
		var all []time.Duration
		for _, t := range trials {
			all = append(all, t.times[i]...)
		}
		slices.Sort(all)
		p.queries[i] = all[len(all)/2]
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		p.evPerS = rates[len(rates)/2]
	}
	return p
}

// jaegerCurve measures the queries through the Jaeger-backed reader, Jaeger on Badger.
func (c *curves) jaegerCurve(ctx context.Context) ([]point, error) {
	ports := freePorts(4)
	health, remote, otlp, metrics := ports[0], ports[1], ports[2], ports[3]
	dir := filepath.Join(c.o.work, "badger")
	conf := filepath.Join(c.o.work, "jaeger.yaml")
	text, err := jaegerConfig(c.o.jaegerTemplate, dir, health, remote, otlp, metrics)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("jaeger config: %w", err)
	}
	cmd := exec.CommandContext(ctx, c.o.jaeger, "--config=file:"+conf)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_SAMPLER=always_off")
	logf, err := os.Create(filepath.Join(c.o.work, "jaeger.log"))
	if err != nil {
		return nil, fmt.Errorf("jaeger log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start jaeger: %w", err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/status", health), time.Minute); err != nil {
		return nil, fmt.Errorf("jaeger: %w", err)
	}
	tel := telemetry.Settings{Logger: c.logger}
	w, err := jaeger.Open(ctx, jaeger.Config{Endpoint: addr(remote), OTLP: otlpsink.Config{Endpoint: addr(otlp)}}, 0, tel)
	if err != nil {
		return nil, fmt.Errorf("jaeger writer: %w", err)
	}
	if err := w.Start(ctx); err != nil {
		return nil, fmt.Errorf("jaeger writer: %w", err)
	}
	defer func() { _ = w.Stop(context.Background()) }()
	// The OTLP sink refuses a batch while its queue is full: wait and send it again.
	export := func(ctx context.Context, spans []*aggregator.Span) error {
		for {
			err := w.Export(ctx, spans)
			if err == nil || ctx.Err() != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var pts []point
	stored := c.kept.Jaeger
	for _, n := range c.o.jaegerPoints {
		if n < stored {
			continue
		}
		if err := c.fill(ctx, stored, n, export); err != nil {
			return nil, err
		}
		stored = n
		c.kept.Jaeger = n
		if err := c.saveKept(); err != nil {
			return nil, err
		}
		// Wait until Jaeger took every span sent.
		if err := waitAccepted(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics), c.o.trees, n); err != nil {
			return nil, err
		}
		// Each query is timed cold: after the reader's cache of traces read (cacheTTL, 10s) expired.
		t, err := c.measure(ctx, n, false, 11*time.Second, "--role", "query", "--store-backend", "jaeger", "--jaeger-endpoint", addr(remote))
		if err != nil {
			return nil, fmt.Errorf("jaeger, %d spans stored: %w", n, err)
		}
		p := summarize(n, []trial{t})
		fmt.Fprintf(os.Stderr, "curves: Jaeger, %s stored: trees %v (slowest %v), query process peak RSS %d MiB\n", millions(n), p.queries, p.slowest, p.queryRSS>>20)
		pts = append(pts, p)
	}
	return pts, nil
}

// measure starts the all-in-one with args, waits until it is idle, times the tree queries (pause
// apart) and, with ingest, posts the distinct load once.
func (c *curves) measure(ctx context.Context, stored int, ingest bool, pause time.Duration, args ...string) (trial, error) {
	var t trial
	ports := freePorts(2)
	audit, api := ports[0], ports[1]
	logf, err := os.OpenFile(filepath.Join(c.o.work, fmt.Sprintf("kelemetry-%d.log", stored)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return t, fmt.Errorf("log: %w", err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, c.o.kelemetry, append([]string{"--config", c.conf, "--audit-addr", addr(audit),
		"--http-addr", addr(api), "--log-level", "warn"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return t, fmt.Errorf("start: %w", err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", api)
	if err := waitHTTP(ctx, base+"/healthz", 2*time.Minute); err != nil {
		return t, err
	}
	waitIdle(ctx, cmd.Process.Pid, 5*time.Minute)
	for _, pods := range c.o.trees {
		times, err := c.timeTree(ctx, base, pods, pause)
		if err != nil {
			return t, err
		}
		t.times = append(t.times, times)
	}
	if rss, err := peakRSS(cmd.Process.Pid); err == nil {
		t.rss = rss
	} else {
		fmt.Fprintf(os.Stderr, "curves: the query process's peak RSS: %v\n", err)
	}
	if ingest {
		if t.rate, err = c.ingest(ctx, audit, api, cmd.Process.Pid); err != nil {
			return t, err
		}
	}
	fmt.Fprintf(os.Stderr, "curves: %s stored: %.0f events per CPU-second, trees %v\n", millions(stored), t.rate, t.times)
	return t, nil
}

// timeTree times the search that draws the Deployment of pods Pods whole: one query to warm up,
// then 5 (3 for trees over 5,000 Pods), pause apart; it returns their times.
func (c *curves) timeTree(ctx context.Context, base string, pods int, pause time.Duration) ([]time.Duration, error) {
	tags, _ := json.Marshal(map[string]string{"resource": "deployments", "name": "web", "namespace": "curve-" + strconv.Itoa(pods)})
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {string(tags)}, "limit": {"1"},
		"start": {strconv.FormatInt(c.w0.UnixMicro(), 10)},
		"end":   {strconv.FormatInt(c.w0.Add(4*aggregator.DefaultWindow-time.Microsecond).UnixMicro(), 10)}}
	u := base + "/api/traces?" + q.Encode()
	n := 5
	if pods > 5000 {
		n = 3
	}
	var times []time.Duration
	for i := range n + 1 {
		if i > 0 && pause > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(pause):
			}
		}
		start := time.Now()
		var d time.Duration
		spans, err := countSpans(ctx, u, func() { d = time.Since(start) })
		if err != nil {
			return nil, fmt.Errorf("tree of %d Pods: %w", pods, err)
		}
		if spans != pods+2 {
			return nil, fmt.Errorf("tree of %d Pods: %d spans drawn, want %d", pods, spans, pods+2)
		}
		if i > 0 {
			times = append(times, d)
		}
	}
	return times, nil
}

// countSpans gets a Jaeger search answer and counts the spans of its first trace; it calls done
// (when not nil) once the answer's last byte is read, before decoding it.
func countSpans(ctx context.Context, u string, done func()) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("query: %s: %s", resp.Status, b)
	}
	// The answer is read whole before it is decoded: the time measured ends with its last byte,
	// as a browser's or curl's does. (Decoding 20 MB of JSON with encoding/json as it arrived
	// added 300-400 ms of this client's own work to the 10,000-pod tree.)
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("answer: %w", err)
	}
	if done != nil {
		done()
	}
	var body struct {
		Data []struct {
			Spans []json.RawMessage `json:"spans"`
		} `json:"data"`
		Errors []struct {
			Msg string `json:"msg"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return 0, fmt.Errorf("answer: %w", err)
	}
	if len(body.Errors) > 0 {
		return 0, fmt.Errorf("answer: %s", body.Errors[0].Msg)
	}
	if len(body.Data) == 0 {
		return 0, errors.New("no trace found")
	}
	return len(body.Data[0].Spans), nil
}

// ingest posts the distinct load and returns the distinct events per CPU-second auditload
// measured.
func (c *curves) ingest(ctx context.Context, audit, api, pid int) (float64, error) {
	cmd := exec.CommandContext(ctx, c.o.auditload, "--url", fmt.Sprintf("http://127.0.0.1:%d/audit/curve", audit),
		"--pid", strconv.Itoa(pid), "--metrics-url", fmt.Sprintf("http://127.0.0.1:%d/metrics", api),
		"--distinct", "--repeat", strconv.Itoa(c.o.copies), c.o.fixture)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("auditload: %w: %s", err, b)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		// server pid 123  1.23 CPU-seconds, 24000 events per CPU-second, peak RSS 200 MiB
		if f := strings.Fields(line); len(f) > 6 && f[0] == "server" && f[1] == "pid" {
			return strconv.ParseFloat(f[5], 64)
		}
	}
	return 0, fmt.Errorf("auditload printed no server figures: %s", b)
}

// waitIdle waits until the process used under 5% of a core for 3 seconds running (or max).
func waitIdle(ctx context.Context, pid int, max time.Duration) {
	deadline := time.Now().Add(max)
	quiet := 0
	last := cpuTime(pid)
	for quiet < 3 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Second)
		now := cpuTime(pid)
		if now-last < 50*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
}

// cpuTime is the user and system time of pid (from /proc; 0 elsewhere).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// waitAccepted waits until Jaeger's OTLP receiver accepted at least the spans sent: the trees'
// spans and n others (object spans make it a little more).
func waitAccepted(ctx context.Context, metricsURL string, trees []int, n int) error {
	want := n
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, err := metricSum(ctx, metricsURL, "otelcol_receiver_accepted_spans")
		if err == nil && got >= float64(want) {
			// Let the storage exporter write what it holds.
			time.Sleep(2 * time.Second)
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("jaeger's metrics after 10 minutes: %w", err)
			}
			return fmt.Errorf("jaeger accepted %.0f spans of %d after 10 minutes", got, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func metricSum(ctx context.Context, u, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("metrics: %w", err)
	}
	var sum float64
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, name) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum, nil
}

func waitHTTP(ctx context.Context, u string, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not answering after %s", u, max)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePorts returns n ports free on 127.0.0.1 now.
func freePorts(n int) []int {
	var ls []net.Listener
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			continue
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return out
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// jaegerConfig is the template of Jaeger on Badger (testdata/jaeger/badger-backend.yaml) with its
// folder and ports.
func jaegerConfig(template, dir string, health, remote, otlp, metrics int) (string, error) {
	b, err := os.ReadFile(template)
	if err != nil {
		return "", fmt.Errorf("jaeger config: %w", err)
	}
	return strings.NewReplacer("{DIR}", dir, "{HEALTH}", strconv.Itoa(health), "{REMOTE}", strconv.Itoa(remote),
		"{OTLP}", strconv.Itoa(otlp), "{METRICS}", strconv.Itoa(metrics)).Replace(string(b)), nil
}

// peakRSS is the peak resident set of process pid so far (VmHWM of /proc/PID/status), in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
