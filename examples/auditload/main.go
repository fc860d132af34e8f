// Command auditload posts recorded audit webhook batches to a Kelemetry webhook, as kube-apiserver's
// webhook backend would, and prints what the server made of them: events accepted per second, the
// server's CPU time and peak RSS (read from /proc when it runs on this machine) and the spans it
// stored and exported (read from its /metrics). Users run it to size a deployment; the project runs
// it to measure the whole process.
//
// Inputs are JSON-lines files, optionally gzipped: either one audit.k8s.io/v1 EventList per line
// (a recorded webhook batch, posted as it is) or one audit Event per line (a log-backend audit
// log, cut into batches of --batch events as the batch backend does). Example, against the
// all-in-one on this machine:
//
//	go run ./examples/auditload --url http://127.0.0.1:8080/audit/demo \
//	    --metrics-url http://127.0.0.1:8081/metrics --workers 4 --repeat 3 \
//	    testdata/bulk/webhook-batches.jsonl.gz
//
// A 429 or 503 answer is retried with the same batch after its Retry-After (default one second),
// as kube-apiserver does; other failures are counted and not retried.
//
// Posting the same batches again measures the webhook's repeat check, not the pipeline. With
// --distinct every pass is new events instead, as a real cluster sends them (namespaces renamed
// per pass, new audit IDs and UIDs, audit timestamps of the time of posting); with --rate and
// --duration it is a steady load for a soak (scripts/soak.sh):
//
//	go run ./examples/auditload --url http://127.0.0.1:8080/audit/demo --distinct \
//	    --rate 600 --duration 15m --batch 100 --progress 1m testdata/bulk/audit.jsonl.gz
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		slog.Error("auditload", "error", err)
		stop()
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	url          string
	files        []string
	workers      int
	repeat       int
	batch        int
	token        string
	tokenFile    string
	caFile       string
	certFile     string
	keyFile      string
	insecure     bool
	pid          int
	metricsURL   string
	metricsToken string
	settle       time.Duration
	settleEvery  time.Duration
	maxRetries   int
	distinct     bool
	rate         float64
	duration     time.Duration
	progress     time.Duration
	clusters     int
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("auditload", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.url, "url", "", "webhook URL, e.g. http://127.0.0.1:8080/audit/<cluster> (required); several, comma-separated, take the batches in turn (replicas behind no load balancer)")
	fs.IntVar(&o.clusters, "clusters", 1, "simulated clusters: batch k is posted as cluster <cluster>-<k mod N> (the URL's last path segment suffixed), as N clusters' kube-apiservers share one Kelemetry")
	fs.IntVar(&o.workers, "workers", 4, "batches posted at once")
	fs.IntVar(&o.repeat, "repeat", 1, "times every file is posted")
	fs.IntVar(&o.batch, "batch", 400, "events per batch when a file is an audit log (one Event per line)")
	fs.StringVar(&o.token, "token", "", "bearer token sent with every batch")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token")
	fs.StringVar(&o.caFile, "ca-file", "", "CA bundle that signed the webhook's certificate (https)")
	fs.StringVar(&o.certFile, "cert", "", "client certificate (https)")
	fs.StringVar(&o.keyFile, "key", "", "client certificate's key (https)")
	fs.BoolVar(&o.insecure, "insecure-skip-verify", false, "do not verify the webhook's certificate")
	fs.IntVar(&o.pid, "pid", 0, "the server's process ID, for CPU time and peak RSS (default: the process listening on the URL's port, when on this machine)")
	fs.StringVar(&o.metricsURL, "metrics-url", "", "the server's /metrics, for the spans stored and exported")
	fs.StringVar(&o.metricsToken, "metrics-token", "", "bearer token for --metrics-url (default: --token)")
	fs.DurationVar(&o.settle, "settle", time.Minute, "how long to wait, after posting, for the server's queue to drain (needs --metrics-url)")
	fs.DurationVar(&o.settleEvery, "settle-interval", 200*time.Millisecond, "how often to read --metrics-url while waiting for the queue to drain (each read costs the server some work: make it rare when counting the server's instructions)")
	fs.IntVar(&o.maxRetries, "max-retries", 10000, "retries of one batch answered 429/503 before it counts as failed")
	fs.BoolVar(&o.distinct, "distinct", false, "post every pass as new events, as a real cluster sends them: namespaces renamed <namespace>-<run>-<pass>, audit IDs and UIDs renamed per pass, audit timestamps set to the time of posting; events are cut into batches of --batch")
	fs.Float64Var(&o.rate, "rate", 0, "events per second to post, paced batch by batch (0: as fast as the workers go)")
	fs.DurationVar(&o.duration, "duration", 0, "post for this long, repeating the files as often as needed (--repeat is then ignored; 0: post --repeat passes)")
	fs.DurationVar(&o.progress, "progress", 0, "print the events posted and accepted so far at this interval (0: no progress lines)")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("flags: %w", err)
	}
	o.files = fs.Args()
	switch {
	case o.url == "":
		return o, errors.New("--url is required")
	case len(o.files) == 0:
		return o, errors.New("name at least one file of batches or audit events")
	case o.workers < 1, o.repeat < 1, o.batch < 1, o.clusters < 1:
		return o, errors.New("--workers, --repeat, --batch and --clusters must be at least 1")
	case (o.certFile == "") != (o.keyFile == ""):
		return o, errors.New("--cert and --key go together")
	case o.settleEvery <= 0:
		return o, errors.New("--settle-interval must be positive")
	case o.rate < 0, o.duration < 0, o.progress < 0:
		return o, errors.New("--rate, --duration and --progress must not be negative")
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return o, fmt.Errorf("token file: %w", err)
		}
		o.token = strings.TrimSpace(string(b))
	}
	if o.metricsToken == "" {
		o.metricsToken = o.token
	}
	return o, nil
}

// batch is one webhook request body and the number of events in it.
type batch struct {
	body   []byte
	events int
}

// readBatches reads a file of EventLists or of Events (one JSON document a line, gzip if the
// name ends in .gz) into webhook batches.
func readBatches(path string, size int) ([]batch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open batches: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 512<<20)
	var out []batch
	var pending []json.RawMessage
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		body, err := json.Marshal(struct {
			Kind       string            `json:"kind"`
			APIVersion string            `json:"apiVersion"`
			Items      []json.RawMessage `json:"items"`
		}{"EventList", "audit.k8s.io/v1", pending})
		if err != nil {
			return fmt.Errorf("encode batch: %w", err)
		}
		out = append(out, batch{body: body, events: len(pending)})
		pending = nil
		return nil
	}
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if head.Kind == "EventList" {
			if err := flush(); err != nil {
				return nil, err
			}
			out = append(out, batch{body: append([]byte(nil), b...), events: len(head.Items)})
			continue
		}
		pending = append(pending, append(json.RawMessage(nil), b...))
		if len(pending) == size {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// tally counts what the server answered.
type tally struct {
	fed, batches, events, retries, failed, failedEvents atomic.Int64
}

// poster posts batches with retries.
type poster struct {
	client     *http.Client
	urls       []string // posted to in turn
	clusters   int      // > 1: the URLs' last segment suffixed -<k mod clusters>
	token      string
	maxRetries int
	t          *tally
	next       atomic.Int64 // the index of the next batch
}

// target is the URL of the k-th batch: the URLs in turn, each batch as the next cluster.
func (p *poster) target(k int64) string {
	u := p.urls[k%int64(len(p.urls))]
	if p.clusters > 1 {
		u = strings.TrimRight(u, "/") + "-" + strconv.FormatInt(k%int64(p.clusters), 10)
	}
	return u
}

func (p *poster) post(ctx context.Context, b batch) error {
	target := p.target(p.next.Add(1) - 1)
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b.body))
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		if p.token != "" {
			req.Header.Set("Authorization", "Bearer "+p.token)
		}
		resp, err := p.client.Do(req)
		if err != nil {
			return fmt.Errorf("post: %w", err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			p.t.batches.Add(1)
			p.t.events.Add(int64(b.events))
			return nil
		case (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && attempt < p.maxRetries:
			p.t.retries.Add(1)
			wait := time.Second
			if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
				wait = time.Duration(s) * time.Second
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return fmt.Errorf("retry: %w", ctx.Err())
			case <-timer.C:
			}
		default:
			return fmt.Errorf("webhook answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		}
	}
}

func newClient(o options) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = o.workers
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecure} // InsecureSkipVerify only when asked for by --insecure-skip-verify
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no certificate", o.caFile)
		}
		cfg.RootCAs = pool
	}
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}, nil
}

// procStats is what /proc tells of the server.
type procStats struct {
	cpu     time.Duration
	peakRSS int64 // bytes (VmHWM: the peak over the process's life)
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func readProc(pid int) (procStats, error) {
	var st procStats
	var err error
	if st.cpu, err = processCPU(pid); err != nil {
		// The same time in hundredths of a second.
		if st.cpu, err = statCPU(pid); err != nil {
			return st, err
		}
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return st, fmt.Errorf("proc status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				st.peakRSS = kb * 1024
			}
		}
	}
	return st, nil
}

// statCPU reads the CPU time (user and system) of process pid from /proc/PID/stat, which counts
// it in hundredths of a second (USER_HZ).
func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("proc stat: %w", err)
	}
	// The command name, in parentheses, may hold spaces: count fields after its end.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat of %d: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat of %d: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("proc stat of %d: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// pidListening finds the process holding a listening TCP socket on port (this machine only; the
// socket must be visible to this user).
func pidListening(port int) (int, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("no listening socket on port %d", port)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && inodes[target] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no visible process listens on port %d", port)
}

// serverPID is --pid, or the process listening on the URL's port when the host is this machine.
func serverPID(o options) int {
	if o.pid != 0 {
		return o.pid
	}
	first, _, _ := strings.Cut(o.url, ",")
	u, err := url.Parse(first)
	if err != nil {
		return 0
	}
	ip := net.ParseIP(u.Hostname())
	if u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0
	}
	pid, err := pidListening(port)
	if err != nil {
		return 0
	}
	return pid
}

// metricSum adds up every series of a counter or gauge in a Prometheus text exposition (name, or
// name_total).
func metricSum(text, name string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(rest, "_total")
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if i := strings.LastIndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// The metrics read after the load.
const (
	metricQueueDepth   = "kelemetry_audit_queue_depth"
	metricSpans        = "kelemetry_aggregator_spans"
	metricStored       = "kelemetry_store_spans_written"
	metricExported     = "kelemetry_otlp_spans_exported"
	metricLinkQueue    = "kelemetry_aggregator_link_queue_depth"
	metricConsumerSeen = "kelemetry_audit_consumer_events"
	metricRepeated     = "kelemetry_audit_webhook_repeated_events"
)

func fetchMetrics(ctx context.Context, client *http.Client, u, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("metrics request: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// Uncompressed: compressing the exposition costs the measured server CPU for nothing.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics answered %d", resp.StatusCode)
	}
	return string(b), nil
}

// settle waits until the server's audit queue and link queue are empty and the spans it handed
// to its sinks stop changing, then returns the last exposition. beforeRead, when not nil, is
// called before each read of it.
func settle(ctx context.Context, client *http.Client, o options, beforeRead func()) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.settle)
	defer cancel()
	last := -1.0
	for {
		if beforeRead != nil {
			beforeRead()
		}
		text, err := fetchMetrics(ctx, client, o.metricsURL, o.metricsToken)
		if err != nil {
			return "", err
		}
		depth, _ := metricSum(text, metricQueueDepth)
		links, _ := metricSum(text, metricLinkQueue)
		spans, _ := metricSum(text, metricSpans)
		if depth == 0 && links == 0 && spans == last {
			return text, nil
		}
		last = spans
		select {
		case <-ctx.Done():
			return text, fmt.Errorf("server still busy after %s: %w", o.settle, ctx.Err())
		case <-time.After(o.settleEvery):
		}
	}
}

// feed hands batches to the workers: the recorded batches pass after pass, or with --distinct new
// copies of their events cut into batches of --batch, paced at --rate, for --repeat passes or
// until --duration has passed since start.
func feed(ctx context.Context, o options, batches []batch, perPass int, work chan<- batch, t *tally, start time.Time) error {
	if perPass == 0 {
		return nil
	}
	var src *distinctSource
	if o.distinct {
		var err error
		if src, err = newDistinctSource(batches); err != nil {
			return err
		}
	}
	total := perPass * o.repeat // events to post; -1: until --duration has passed
	if o.duration > 0 {
		total = -1
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(o.duration))
		defer cancel()
	}
	step := time.Microsecond // between the timestamps of consecutive distinct copies
	if o.rate > 0 {
		step = time.Duration(float64(time.Second) / o.rate)
	}
	fed := 0
	for i := 0; total < 0 || fed < total; i++ {
		var b batch
		n := 0
		if src != nil {
			n = o.batch
			if total >= 0 {
				n = min(n, total-fed)
			}
		} else {
			b = batches[i%len(batches)]
			n = b.events
		}
		if o.rate > 0 {
			// A batch is due when its first event is.
			due := time.Until(start.Add(time.Duration(float64(fed) / o.rate * float64(time.Second))))
			if due > 0 {
				timer := time.NewTimer(due)
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-timer.C:
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if src != nil {
			b = src.nextBatch(n, time.Now(), step)
		}
		select {
		case work <- b:
		case <-ctx.Done():
			return nil
		}
		fed += n
		t.fed.Add(int64(n))
	}
	return nil
}

// startProgress prints the events posted and accepted so far every interval until the returned
// function is called (nothing when interval is 0).
func startProgress(ctx context.Context, interval time.Duration, out io.Writer, t *tally, start time.Time) func() {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				fmt.Fprintf(out, "progress %7.1fs  posted %d, accepted %d, retried %d, failed %d\n",
					time.Since(start).Seconds(), t.fed.Load(), t.events.Load(), t.retries.Load(), t.failed.Load())
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	var batches []batch
	perPass := 0
	for _, f := range o.files {
		bs, err := readBatches(f, o.batch)
		if err != nil {
			return err
		}
		for _, b := range bs {
			perPass += b.events
		}
		batches = append(batches, bs...)
	}
	client, err := newClient(o)
	if err != nil {
		return err
	}
	pid := serverPID(o)
	// The server's CPU time is read after the first and before the last exposition it serves
	// for us (one takes it a few milliseconds), so that our reads count as little as they can.
	var baseline string
	if o.metricsURL != "" {
		if baseline, err = fetchMetrics(ctx, client, o.metricsURL, o.metricsToken); err != nil {
			return err
		}
	}
	var before procStats
	if pid != 0 {
		if before, err = readProc(pid); err != nil {
			return err
		}
	}

	t := &tally{}
	p := &poster{client: client, urls: strings.Split(o.url, ","), clusters: o.clusters, token: o.token, maxRetries: o.maxRetries, t: t}
	work := make(chan batch)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	start := time.Now()
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if err := p.post(ctx, b); err != nil {
					t.failed.Add(1)
					t.failedEvents.Add(int64(b.events))
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	stopProgress := startProgress(ctx, o.progress, out, t, start)
	feedErr := feed(ctx, o, batches, perPass, work, t, start)
	close(work)
	wg.Wait()
	stopProgress()
	posted := time.Since(start)
	if feedErr != nil {
		return feedErr
	}

	fmt.Fprintf(out, "events accepted   %d of %d (%d batches, %d retried after 429/503, %d failed)\n",
		t.events.Load(), t.fed.Load(), t.batches.Load(), t.retries.Load(), t.failed.Load())
	fmt.Fprintf(out, "wall time         %.2fs, %.0f events/s accepted\n", posted.Seconds(), float64(t.events.Load())/posted.Seconds())
	var final string
	var settled procStats // the server's CPU time just before settle's last read
	if o.metricsURL != "" {
		var mark func()
		if pid != 0 {
			mark = func() {
				if st, err := readProc(pid); err == nil {
					settled = st
				}
			}
		}
		final, err = settle(ctx, client, o, mark)
		if err != nil {
			fmt.Fprintf(out, "settle            %v\n", err)
		}
		fmt.Fprintf(out, "drained after     %.2fs\n", time.Since(start).Seconds())
	}
	if pid != 0 {
		after, err := readProc(pid)
		if err != nil {
			return err
		}
		cpu := after.cpu - before.cpu
		if final != "" && settled.cpu > 0 {
			cpu = settled.cpu - before.cpu
		}
		fmt.Fprintf(out, "server pid %-6d  %.2f CPU-seconds, %.0f events per CPU-second, peak RSS %.0f MiB\n",
			pid, cpu.Seconds(), float64(t.events.Load())/max(cpu.Seconds(), 0.01), float64(after.peakRSS)/(1<<20))
	}
	if final != "" {
		for _, m := range []struct{ label, name string }{
			{"spans to sinks", metricSpans},
			{"spans stored", metricStored},
			{"spans exported", metricExported},
			{"consumer events", metricConsumerSeen},
			// Events posted again (--repeat) that the webhook answered without queueing them.
			{"repeats skipped", metricRepeated},
		} {
			v, ok := metricSum(final, m.name)
			if !ok {
				continue
			}
			v0, _ := metricSum(baseline, m.name)
			fmt.Fprintf(out, "%-17s %.0f\n", m.label, v-v0)
		}
	}
	if firstErr != nil {
		return fmt.Errorf("%d batches failed, the first: %w", t.failed.Load(), firstErr)
	}
	return ctx.Err()
}
