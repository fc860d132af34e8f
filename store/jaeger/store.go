package jaeger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults of Config.
const (
	defaultTimeout      = 10 * time.Second
	defaultCacheBytes   = 64 << 20
	defaultCacheTTL     = 10 * time.Second
	defaultSearchDepth  = 1000
	defaultProbeWindows = 16
)

// clusterService is the service name of the cluster markers the jaeger backend writes: one span
// per cluster and window, named after the cluster, so that Clusters is one GetOperations call.
const clusterService = "kelemetry-clusters"

// kindCluster is the span kind of cluster markers; readers skip them.
const kindCluster aggregator.SpanKind = "cluster"

// getBatch bounds the traces one GetTraces call asks for, and getParallelism the calls one read
// runs at once.
const (
	getBatch       = 64
	getParallelism = 4
)

// maxRecvBytes is the largest streamed message accepted from the backend.
const maxRecvBytes = 64 << 20

// Config configures the jaeger backend: traces written over OTLP to a Jaeger collector (or
// any OTLP receiver in front of a Jaeger database), and read back through Jaeger's remote storage
// API (jaeger.storage.v2 gRPC, e.g. Jaeger v2 running its remote_storage extension). Any number
// of processes may write and read the same backend.
type Config struct {
	// Endpoint is the jaeger.storage.v2 gRPC endpoint traces are read from: host:port or
	// grpc://host:port (plaintext unless TLS.Enabled), grpcs://host:port (TLS). Required.
	Endpoint string `yaml:"endpoint"`
	// TLS configures TLS to Endpoint (CA, client certificate, server name).
	TLS otlpsink.TLSConfig `yaml:"tls"`
	// TokenFile holds a bearer token sent with every read as gRPC metadata "authorization".
	TokenFile string `yaml:"tokenFile"`
	// Timeout bounds one read call (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// CacheBytes bounds the cache of traces read (default 64 MiB).
	CacheBytes int64 `yaml:"cacheBytes"`
	// CacheTTL is how long a trace read is reused (default 10s): reads of one query share it, and
	// spans written since show up after at most this long.
	CacheTTL time.Duration `yaml:"cacheTTL"`
	// SearchDepth is the most traces one search asks the backend for (default 1000). Objects
	// whose windows are beyond it are missed: narrow the search.
	SearchDepth int `yaml:"searchDepth"`
	// ProbeWindows: an object's windows in a range of at most this many windows are read by their
	// computed trace IDs (default 16); a longer range is searched by the object's attributes.
	ProbeWindows int `yaml:"probeWindows"`
	// OTLP is where spans are written: the OTLP receiver of the Jaeger collector (see
	// otlpsink.Config). Without an endpoint the backend is read-only (a query replica).
	OTLP otlpsink.Config `yaml:"otlp"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = defaultCacheBytes
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = defaultCacheTTL
	}
	if c.SearchDepth == 0 {
		c.SearchDepth = defaultSearchDepth
	}
	if c.ProbeWindows == 0 {
		c.ProbeWindows = defaultProbeWindows
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Endpoint == "" {
		return errors.New("store: jaeger.endpoint (the jaeger.storage.v2 gRPC address to read from) is required")
	}
	if _, _, err := c.target(); err != nil {
		return err
	}
	switch {
	case c.Timeout < 0, c.CacheTTL < 0:
		return errors.New("store: jaeger.timeout and jaeger.cacheTTL must not be negative")
	case c.CacheBytes < 0, c.SearchDepth < 0, c.ProbeWindows < 0:
		return errors.New("store: jaeger.cacheBytes, jaeger.searchDepth and jaeger.probeWindows must not be negative")
	}
	if c.OTLP.Endpoint != "" {
		if err := c.OTLP.Validate(); err != nil {
			return fmt.Errorf("store: jaeger.otlp: %w", err)
		}
	}
	return nil
}

// target is the gRPC target of Endpoint and whether it uses TLS.
func (c Config) target() (addr string, useTLS bool, err error) {
	addr, useTLS = c.Endpoint, c.TLS.Enabled
	switch {
	case strings.HasPrefix(addr, "grpcs://"):
		addr, useTLS = strings.TrimPrefix(addr, "grpcs://"), true
	case strings.HasPrefix(addr, "grpc://"):
		addr = strings.TrimPrefix(addr, "grpc://")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false, fmt.Errorf("store: jaeger.endpoint %q: want host:port, grpc://host:port or grpcs://host:port: %w", c.Endpoint, err)
	}
	return addr, useTLS, nil
}

// Store is the jaeger backend: a store.Store whose spans go over OTLP to a Jaeger collector and are
// read back through jaeger.storage.v2. Several ingesting processes may write it and any number of
// query processes read it; a span written more than once is read once, in its newest version.
//
// Reads need no index of their own: an object's trace IDs are computed from its key and window
// (aggregator.TraceIDFor) and read in batches; objects are found with attribute searches
// (FindTraceIDs) on the object spans. FindTraces (a trace ID prefix scan) is not supported.
type Store struct {
	cfg    Config
	window time.Duration
	logger *slog.Logger
	conn   *grpc.ClientConn
	client storagev2.TraceReaderClient
	sink   *otlpsink.Sink // nil: read-only
	cache  *traceCache
	now    func() time.Time

	marked *lru.Cache[clusterWindow, struct{}]

	servicesMu sync.Mutex
	services   []string
	servicesAt time.Time

	reads     metric.Int64Counter
	markers   metric.Int64Counter
	dups      metric.Int64Counter
	truncated metric.Int64Counter
	cacheReg  metric.Registration
	stopOnce  sync.Once
	feed      *changefeed.Feed
}

type clusterWindow struct {
	cluster string
	window  int64
}

var (
	_ aggregator.HealthChecker = (*Store)(nil)
	_ aggregator.Syncer        = (*Store)(nil)
	_ aggregator.SpanChecker   = (*Store)(nil)
)

// Open connects to the backend cfg names, for traces of window length w. No connection is
// made yet: a backend that is down fails reads (with store.ErrUnavailable) until it is back.
func Open(ctx context.Context, cfg Config, w aggregator.Window, tel telemetry.Settings) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	addr, useTLS, err := cfg.target()
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if useTLS {
		tc, err := cfg.TLS.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("store: jaeger.tls: %w", err)
		}
		creds = credentials.NewTLS(tc)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvBytes)),
	}
	if cfg.TokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(&tokenFile{path: cfg.TokenFile, secure: useTLS}))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: jaeger endpoint %s: %w", cfg.Endpoint, err)
	}
	marked, err := lru.New[clusterWindow, struct{}](4096)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	j := &Store{
		cfg: cfg, window: w.Length(), logger: tel.Log().With("component", "store", "backend", "jaeger", "endpoint", cfg.Endpoint),
		conn: conn, client: storagev2.NewTraceReaderClient(conn), cache: newTraceCache(cfg.CacheBytes), now: time.Now, marked: marked,
	}
	j.feed = changefeed.NewFeed(j.findChanges)
	if cfg.OTLP.Endpoint != "" {
		if j.sink, err = otlpsink.New(ctx, cfg.OTLP, tel); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("store: jaeger.otlp: %w", err)
		}
	}
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/store")
	var readSets []attribute.Set
	for _, method := range []string{"FindTraceIDs", "GetTraces", "GetServices", "GetOperations"} {
		for _, result := range []string{"ok", "unavailable", "canceled", "error"} {
			readSets = append(readSets, attribute.NewSet(attribute.String("method", method), attribute.String("result", result)))
		}
	}
	j.reads = m.Counter("kelemetry.store.jaeger.reads",
		"Calls to the jaeger.storage.v2 backend, by method (FindTraceIDs, GetTraces, GetServices, GetOperations) and result (ok, unavailable, canceled, error).", "",
		readSets...)
	j.markers = m.Counter("kelemetry.store.jaeger.cluster_markers", "Cluster marker spans written (one per cluster and window; they name the clusters).", "", *attribute.EmptySet())
	j.dups = m.Counter("kelemetry.store.jaeger.duplicate_spans", "Repeated versions of spans read and dropped (several writers, updated spans).", "", *attribute.EmptySet())
	j.truncated = m.Counter("kelemetry.store.jaeger.search_truncated", "Searches that reached searchDepth: objects beyond it were missed.", "", *attribute.EmptySet())
	j.cacheReg = m.Gauge("kelemetry.store.jaeger.cache.evictions", "Traces evicted from the read cache for room.", "", func() (int64, bool) {
		_, _, ev := j.cache.stats()
		return ev, true
	})
	if err := m.Err(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	j.logger.Info("trace store: jaeger", "write", cfg.OTLP.Endpoint, "readOnly", j.sink == nil)
	return j, nil
}

// tokenFile sends the bearer token of a file, re-read at most every 10 seconds.
type tokenFile struct {
	path   string
	secure bool

	mu    sync.Mutex
	token string
	read  time.Time
}

func (t *tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == "" || time.Since(t.read) > 10*time.Second {
		b, err := os.ReadFile(t.path)
		if err != nil {
			return nil, fmt.Errorf("store: jaeger.tokenFile: %w", err)
		}
		t.token, t.read = strings.TrimSpace(string(b)), time.Now()
	}
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (t *tokenFile) RequireTransportSecurity() bool { return t.secure }

// Start implements store.Store: it starts the writer.
func (j *Store) Start(ctx context.Context) error {
	if j.sink == nil {
		return nil
	}
	return j.sink.Start(ctx)
}

// Stop implements store.Store: it flushes the writer within ctx and closes the connection to the
// backend. Later calls return nil.
func (j *Store) Stop(ctx context.Context) error {
	var errs []error
	if j.sink != nil {
		errs = append(errs, j.sink.Stop(ctx))
	}
	j.stopOnce.Do(func() {
		j.cacheReg.Unregister() //nolint:errcheck // best effort
		if err := j.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close jaeger connection: %w", err))
		}
	})
	return errors.Join(errs...)
}

// Health reports the writer's state (busy while its queue is nearly full).
func (j *Store) Health(ctx context.Context) error {
	if j.sink == nil {
		return nil
	}
	return j.sink.Health(ctx)
}

// Sync implements aggregator.Syncer: it returns once the collector acknowledged every span
// Export accepted before the call, sending them at once (otlpsink.Sink.Sync), or an error
// when it did not (receiver down until ctx ends, spans dropped). A read-only backend has
// nothing to sync.
func (j *Store) Sync(ctx context.Context) error {
	if j.sink == nil {
		return nil
	}
	if err := j.sink.Sync(ctx); err != nil {
		return fmt.Errorf("store: jaeger: %w", err)
	}
	return nil
}

// Export writes spans over OTLP, with a cluster marker for each cluster and window not marked
// yet by this process. A read-only backend refuses.
func (j *Store) Export(ctx context.Context, spans []*aggregator.Span) error {
	if j.sink == nil {
		return errors.New("store: the jaeger backend is read-only (no jaeger.otlp.endpoint)")
	}
	var marks []clusterWindow
	batch := spans
	for _, sp := range spans {
		cw := clusterWindow{cluster: sp.Object.Cluster, window: query.WindowNanos(sp)}
		if cw.cluster == "" || j.marked.Contains(cw) || slices.Contains(marks, cw) {
			continue
		}
		if len(marks) == 0 {
			batch = slices.Clone(spans)
		}
		marks = append(marks, cw)
		batch = append(batch, j.marker(cw))
	}
	if err := j.sink.Export(ctx, batch); err != nil {
		return err
	}
	for _, cw := range marks {
		j.marked.Add(cw, struct{}{})
	}
	if len(marks) > 0 {
		j.markers.Add(ctx, int64(len(marks)))
	}
	for _, sp := range spans {
		j.cache.drop(sp.TraceID)
	}
	j.feed.Publish(spans) // never blocks
	return nil
}

func (j *Store) marker(cw clusterWindow) *aggregator.Span {
	w := time.Unix(0, cw.window).UTC()
	tid := aggregator.TraceIDFor(aggregator.ObjectKey{Cluster: cw.cluster}, w)
	return &aggregator.Span{
		TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: kindCluster, Source: clusterService,
		Name: cw.cluster, Object: aggregator.ObjectRef{Cluster: cw.cluster}, Window: w, Start: w, End: w.Add(j.window),
	}
}

// readError classifies a failed call: the backend down or too slow wraps query.ErrUnavailable.
func (j *Store) readError(ctx context.Context, method string, err error) error {
	result := "error"
	defer func() {
		j.reads.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method), attribute.String("result", result)))
	}()
	code := status.Code(err)
	if errors.Is(ctx.Err(), context.Canceled) || code == codes.Canceled {
		result = "canceled"
		return fmt.Errorf("jaeger %s: %w", method, context.Canceled)
	}
	switch code {
	case codes.DeadlineExceeded:
		result = "unavailable"
		return fmt.Errorf("%w: jaeger storage at %s: %s timed out after %s", query.ErrUnavailable, j.cfg.Endpoint, method, j.cfg.Timeout)
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		result = "unavailable"
		return fmt.Errorf("%w: jaeger storage at %s: %s: %s", query.ErrUnavailable, j.cfg.Endpoint, method, status.Convert(err).Message())
	}
	return fmt.Errorf("jaeger storage at %s: %s: %w", j.cfg.Endpoint, method, err)
}

func (j *Store) ok(ctx context.Context, method string) {
	j.reads.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method), attribute.String("result", "ok")))
}

// expiry is when a cached read goes stale. Every window ages alike: a replay, a late Kubernetes
// Event or a replica catching up may still write into a window long closed.
func (j *Store) expiry(now time.Time) time.Time { return now.Add(j.cfg.CacheTTL) }

// GetTrace returns the spans of one trace, or store.ErrNotFound.
func (j *Store) GetTrace(ctx context.Context, id trace.TraceID) ([]*aggregator.Span, error) {
	var w time.Time
	if _, tw, ok := aggregator.ParseTraceID(id); ok {
		w = tw
	}
	out, err := j.GetTraces(ctx, []query.ObjectWindow{{Window: w, TraceID: id}})
	if err != nil {
		return nil, err
	}
	if len(out[0]) == 0 {
		return nil, query.ErrNotFound
	}
	return out[0], nil
}

// GetTraces reads the traces of ws, from the cache or in batches from the backend.
func (j *Store) GetTraces(ctx context.Context, ws []query.ObjectWindow) ([][]*aggregator.Span, error) {
	out := make([][]*aggregator.Span, len(ws))
	now := j.now()
	var miss []int
	for i, w := range ws {
		if spans, ok := j.cache.get(w.TraceID, now); ok {
			out[i] = inWindow(spans, w.Window)
			continue
		}
		miss = append(miss, i)
	}
	if err := inBatches(miss, func(batch []int) error { return j.getBatch(ctx, ws, batch, out, now) }); err != nil {
		return nil, err
	}
	return out, nil
}

// inBatches calls fn on idx cut into batches of getBatch, getParallelism at a time (each batch
// is a round trip), and joins their errors.
func inBatches(idx []int, fn func(batch []int) error) error {
	var batches [][]int
	for len(idx) > 0 {
		n := min(len(idx), getBatch)
		batches = append(batches, idx[:n])
		idx = idx[n:]
	}
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	sem := make(chan struct{}, getParallelism)
	for bi, batch := range batches {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[bi] = fn(batch)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// HasSpans implements aggregator.SpanChecker: it reads the traces of refs from the backend,
// past the cache (another replica may have written them a moment ago), and reports which of the
// spans they hold. Errors are those of GetTraces (store.ErrUnavailable while the backend is down).
func (j *Store) HasSpans(ctx context.Context, refs []aggregator.SpanRef) ([]bool, error) {
	out := make([]bool, len(refs))
	// One query per trace and window.
	type tw struct {
		tid trace.TraceID
		w   int64
	}
	first := map[tw]int{}
	var uniq []int
	for i, r := range refs {
		k := tw{r.TraceID, r.Window.UnixNano()}
		if _, ok := first[k]; !ok {
			first[k] = i
			uniq = append(uniq, i)
		}
	}
	var mu sync.Mutex
	err := inBatches(uniq, func(batch []int) error {
		req := &storagev2.GetTracesRequest{}
		for _, i := range batch {
			p := &storagev2.GetTraceParams{TraceId: refs[i].TraceID[:]}
			if w := refs[i].Window; !w.IsZero() {
				p.StartTime, p.EndTime = timestamppb.New(w), timestamppb.New(w.Add(j.window))
			}
			req.Query = append(req.Query, p)
		}
		got, err := j.read(ctx, "GetTraces", func(ctx context.Context) (grpc.ServerStreamingClient[tracev1.TracesData], error) {
			return j.client.GetTraces(ctx, req)
		})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, r := range refs {
			if _, ok := got.byID[r.TraceID][r.SpanID]; ok {
				out[i] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: jaeger: check stored spans: %w", err)
	}
	return out, nil
}

// getBatch reads the traces ws[i] of one batch of indexes into out[i] and the cache.
func (j *Store) getBatch(ctx context.Context, ws []query.ObjectWindow, batch []int, out [][]*aggregator.Span, now time.Time) error {
	req := &storagev2.GetTracesRequest{}
	seen := map[trace.TraceID]bool{}
	for _, i := range batch {
		w := ws[i]
		if seen[w.TraceID] {
			continue
		}
		seen[w.TraceID] = true
		p := &storagev2.GetTraceParams{TraceId: w.TraceID[:]}
		if !w.Window.IsZero() {
			p.StartTime, p.EndTime = timestamppb.New(w.Window), timestamppb.New(w.Window.Add(j.window))
		}
		req.Query = append(req.Query, p)
	}
	got, err := j.read(ctx, "GetTraces", func(ctx context.Context) (grpc.ServerStreamingClient[tracev1.TracesData], error) {
		return j.client.GetTraces(ctx, req)
	})
	if err != nil {
		return err
	}
	for _, i := range batch {
		w := ws[i]
		spans := got.sorted(w.TraceID)
		out[i] = inWindow(spans, w.Window)
		j.cache.put(w.TraceID, spans, j.expiry(now))
	}
	return nil
}

// inWindow returns the spans of window w (all when w is zero); a trace ID asked for with another
// window than its own has none.
func inWindow(spans []*aggregator.Span, w time.Time) []*aggregator.Span {
	if w.IsZero() || len(spans) == 0 || spans[0].Window.Equal(w) && spans[len(spans)-1].Window.Equal(w) {
		return spans
	}
	var out []*aggregator.Span
	for _, sp := range spans {
		if sp.Window.Equal(w) {
			out = append(out, sp)
		}
	}
	return out
}

// read runs one streaming call within the read timeout and collects its spans.
func (j *Store) read(ctx context.Context, method string, call func(context.Context) (grpc.ServerStreamingClient[tracev1.TracesData], error)) (*traceSpans, error) {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	stream, err := call(ctx)
	if err != nil {
		return nil, j.readError(ctx, method, err)
	}
	got := newTraceSpans(j.window)
	for {
		td, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if status.Code(err) == codes.NotFound {
				break
			}
			return nil, j.readError(ctx, method, err)
		}
		got.add(td)
	}
	if got.dups > 0 {
		j.dups.Add(ctx, int64(got.dups))
	}
	j.ok(ctx, method)
	return got, nil
}

// FindTraces is not supported: remote backends cannot scan trace IDs by prefix.
func (j *Store) FindTraces(context.Context, query.TraceQuery) ([]query.TraceRef, error) {
	return nil, fmt.Errorf("store: the jaeger backend cannot find traces by an ID prefix: %w", errors.ErrUnsupported)
}

// Clusters returns the clusters written by any process (their markers).
func (j *Store) Clusters(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	resp, err := j.client.GetOperations(ctx, &storagev2.GetOperationsRequest{Service: clusterService})
	if err != nil {
		return nil, j.readError(ctx, "GetOperations", err)
	}
	j.ok(ctx, "GetOperations")
	out := make([]string, 0, len(resp.GetOperations()))
	for _, op := range resp.GetOperations() {
		if op.GetName() != "" && !slices.Contains(out, op.GetName()) {
			out = append(out, op.GetName())
		}
	}
	slices.Sort(out)
	return out, nil
}
