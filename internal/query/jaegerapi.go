package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// JaegerAPI serves the query engine through Jaeger Query's HTTP API, so that Jaeger UI and
// Grafana's Jaeger data source work against Kelemetry. Services are display modes (Modes),
// operations are cluster names, and every returned trace ID is a displayID.
//
//	GET /api/services                       display modes, the default first
//	GET /api/services/{service}/operations  cluster names
//	GET /api/operations?service=            cluster names as {name, spanKind}
//	GET /api/traces?service=&operation=&tags=&tag=&start=&end=&lookback=&limit=&minDuration=&maxDuration=
//	GET /api/traces?traceID=...             lookup by display ID (repeatable)
//	GET /api/traces/{traceID}               one result, in the mode its ID names, or a merge
//	                                        (a merge ID: see mergeID)
//	GET /api/traces/merge?id=&id=...        several results as one trace (see mergeID)
//	GET /api/dependencies?endTs=&lookback=  the resource -> resource graph of links (Jaeger's
//	                                        dependency view; endTs and lookback in ms)
//	GET /redirect?cluster=&group=&resource=&namespace=&name=&time=&mode=
//	                                        302 to /trace/{id}, 404 when nothing matches
type JaegerAPI struct{ queryAPI }

// queryAPI is what the HTTP APIs over the query engine share.
type queryAPI struct {
	engine  *Engine
	reader  store.Reader
	cfg     Config
	logger  *slog.Logger
	metrics queryMetrics
	now     func() time.Time
}

func newQueryAPI(e *Engine, tel telemetry.Settings, api string) queryAPI {
	return queryAPI{engine: e, reader: e.Reader(), cfg: e.Config(), logger: tel.Log().With("component", "frontend"),
		metrics: newQueryMetrics(tel, api), now: time.Now}
}

// heavy limits h to the engine's concurrent heavy requests and bounds its time by
// Config.Timeout.
func (a *queryAPI) heavy(h http.HandlerFunc) http.HandlerFunc {
	return heavy(a.engine.limiter, a.metrics, a.cfg.Timeout, h)
}

// truncated counts a truncated answer.
func (a *queryAPI) truncated(ctx context.Context) {
	a.metrics.truncated.Add(ctx, 1, metric.WithAttributes(a.metrics.api))
}

// NewJaegerAPI serves Jaeger Query's HTTP API over the engine's store, within the engine's
// budgets (Config).
func NewJaegerAPI(e *Engine, tel telemetry.Settings) *JaegerAPI {
	return &JaegerAPI{newQueryAPI(e, tel, "jaeger")}
}

// Register adds the routes to mux. Searches and trace lookups count as heavy requests
// (Config.MaxConcurrent); services, operations and redirects do not.
func (a *JaegerAPI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/services", a.services)
	mux.HandleFunc("GET /api/services/{service}/operations", a.serviceOperations)
	mux.HandleFunc("GET /api/operations", a.operations)
	mux.HandleFunc("GET /api/traces", a.heavy(a.search))
	mux.HandleFunc("GET /api/traces/{traceID}", a.heavy(a.getTrace))
	mux.HandleFunc("GET /api/traces/merge", a.heavy(a.merge))
	mux.HandleFunc("GET /api/dependencies", a.heavy(a.dependencies))
	mux.HandleFunc("GET /redirect", a.redirect)
}

// Search defaults, as Jaeger Query has them.
const (
	defaultLookback = 48 * time.Hour
	defaultAPILimit = 100
	maxAPILimit     = 1000
)

func jaegerError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, jaegerResponse{Errors: []JaegerError{{Code: code, Msg: fmt.Sprintf(format, args...)}}})
}

func (a *queryAPI) internalError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, context.Canceled):
	case errors.Is(err, ErrBudget):
		w.Header().Set("Retry-After", a.engine.limiter.retryAfter())
		jaegerError(w, http.StatusServiceUnavailable, "%s: %v", what, err)
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", a.engine.limiter.retryAfter())
		jaegerError(w, http.StatusServiceUnavailable, "%s: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		w.Header().Set("Retry-After", a.engine.limiter.retryAfter())
		jaegerError(w, http.StatusServiceUnavailable, "%s: time budget of %s reached; narrow the time range", what, a.cfg.Timeout)
	default:
		a.logger.Error(what, "error", err)
		jaegerError(w, http.StatusInternalServerError, "%s: %v", what, err)
	}
}

func (a *JaegerAPI) services(w http.ResponseWriter, _ *http.Request) {
	modes := Modes()
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.Name()
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: names, Total: len(names)})
}

// clustersOfService checks the service (a display mode) and lists the clusters, its
// "operations"; false means an error answer was written.
func (a *JaegerAPI) clustersOfService(ctx context.Context, w http.ResponseWriter, service string) ([]string, bool) {
	if _, err := ParseMode(service); err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return nil, false
	}
	cl, err := a.reader.Clusters(ctx)
	if err != nil {
		a.internalError(w, "list clusters", err)
		return nil, false
	}
	return cl, true
}

func (a *JaegerAPI) serviceOperations(w http.ResponseWriter, r *http.Request) {
	cl, ok := a.clustersOfService(r.Context(), w, r.PathValue("service"))
	if !ok {
		return
	}
	var data any
	if len(cl) > 0 {
		data = cl
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: data, Total: len(cl)})
}

// jaegerOperation is one entry of GET /api/operations.
type jaegerOperation struct {
	Name     string `json:"name"`
	SpanKind string `json:"spanKind"`
}

func (a *JaegerAPI) operations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("service") == "" {
		jaegerError(w, http.StatusBadRequest, "parameter 'service' is required")
		return
	}
	cl, ok := a.clustersOfService(r.Context(), w, q.Get("service"))
	if !ok {
		return
	}
	ops := make([]jaegerOperation, len(cl))
	for i, c := range cl {
		ops[i] = jaegerOperation{Name: c, SpanKind: q.Get("spanKind")}
	}
	var data any
	if len(ops) > 0 {
		data = ops
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: data, Total: len(ops)})
}

// SearchRequest is a parsed GET /api/traces search.
type SearchRequest struct {
	Mode                     Mode
	Query                    Query
	MinDuration, MaxDuration time.Duration
}

// ParseSearch reads the parameters of a Jaeger search. Times are Unix microseconds; without
// start the range is end-lookback (a Go duration or Nd/Nw, as Jaeger UI sends it) or end-48h;
// without end it ends now. The range is widened to whole seconds, as display IDs hold it.
func ParseSearch(q url.Values, now time.Time) (SearchRequest, error) {
	var req SearchRequest
	var err error
	if req.Mode, err = ParseMode(q.Get("service")); err != nil {
		return req, err
	}
	if op := q.Get("operation"); op != "" && op != "all" {
		req.Query.Cluster = op
	}
	tags := map[string]string{}
	for _, raw := range q["tags"] {
		if err := parseTags(raw, tags); err != nil {
			return req, err
		}
	}
	for _, kv := range q["tag"] {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || k == "" {
			return req, fmt.Errorf("malformed 'tag' parameter %q, want key:value", kv)
		}
		tags[k] = v
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		applyTag(&req.Query, k, tags[k])
	}

	end := clampTime(now)
	if s := q.Get("end"); s != "" {
		if end, err = parseMicros("end", s); err != nil {
			return req, err
		}
	}
	start := before(end, defaultLookback)
	if s := q.Get("start"); s != "" {
		if start, err = parseMicros("start", s); err != nil {
			return req, err
		}
	} else if lb := q.Get("lookback"); lb != "" && lb != "custom" {
		d, err := parseLookback(lb)
		if err != nil {
			return req, err
		}
		start = before(end, d)
	}
	if end.Before(start) {
		return req, errors.New("'end' is before 'start'")
	}
	req.Query.From = start.Truncate(time.Second).UTC()
	req.Query.To = end.UTC()
	if end.Nanosecond() != 0 {
		req.Query.To = clampTime(end.Truncate(time.Second).Add(time.Second)).UTC()
	}

	req.Query.Limit = defaultAPILimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return req, fmt.Errorf("malformed 'limit' parameter %q", s)
		}
		if n > 0 {
			req.Query.Limit = min(n, maxAPILimit)
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"minDuration", &req.MinDuration}, {"maxDuration", &req.MaxDuration}} {
		if s := q.Get(p.name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				return req, fmt.Errorf("malformed '%s' parameter: %w", p.name, err)
			}
			if d < 0 {
				return req, fmt.Errorf("malformed '%s' parameter %q: negative", p.name, s)
			}
			*p.dst = d
		}
	}
	if req.MaxDuration != 0 && req.MaxDuration < req.MinDuration {
		return req, errors.New("'maxDuration' must be greater than 'minDuration'")
	}
	return req, nil
}

func parseLookback(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	if n := len(s); n > 1 {
		unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[n-1]]
		v, err := strconv.ParseInt(s[:n-1], 10, 64)
		tooLong := errors.Is(err, strconv.ErrRange) && s[0] != '-'
		switch {
		case unit == 0:
		case tooLong || (err == nil && v > int64(math.MaxInt64/unit)):
			return math.MaxInt64, nil // clamped: the range starts at MinQueryTime
		case err == nil && v > 0:
			return time.Duration(v) * unit, nil
		}
	}
	return 0, fmt.Errorf("malformed 'lookback' parameter %q", s)
}

// Tag aliases: the short names users type and the predecessor's tag names.
var tagAliases = map[string]string{
	"user": aggregator.AttrUser, "username": aggregator.AttrUser,
	"verb": aggregator.AttrVerb, "tag": aggregator.AttrVerb,
	"auditID": aggregator.AttrAuditID, "auditId": aggregator.AttrAuditID, "audit.id": aggregator.AttrAuditID,
	"userAgent": aggregator.AttrUserAgent, "sourceIP": aggregator.AttrSourceIP,
	"responseCode": aggregator.AttrStatusCode, "code": aggregator.AttrStatusCode,
	"subresource": aggregator.AttrSubresource,
}

// applyTag sets an object field for the key tags (short or attribute names) and adds an event
// attribute filter for the rest.
func applyTag(q *Query, k, v string) {
	switch k {
	case "cluster", aggregator.AttrCluster:
		q.Cluster = v
	case "group", aggregator.AttrGroup:
		q.Group = v
	case "resource", aggregator.AttrResource:
		q.Resource = v
	case "namespace", aggregator.AttrNamespace:
		q.Namespace = v
	case "name", aggregator.AttrName:
		q.Name = v
	default:
		if full, ok := tagAliases[k]; ok {
			k = full
		}
		q.Attributes = append(q.Attributes, aggregator.Attr{Key: k, Value: v})
	}
}

// parseTags reads a tags parameter: a JSON object of strings, or logfmt (key=value pairs,
// values optionally double-quoted; a bare key means "true").
func parseTags(raw string, into map[string]string) error {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil
	}
	if strings.HasPrefix(raw, "{") {
		var m map[string]string
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return fmt.Errorf("malformed 'tags' parameter, cannot unmarshal JSON: %w", err)
		}
		for k, v := range m {
			into[k] = v
		}
		return nil
	}
	return parseLogfmt(raw, into)
}

func parseLogfmt(s string, into map[string]string) error {
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
		if i >= len(s) {
			return nil
		}
		ks := i
		for i < len(s) && s[i] != '=' && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '"' {
			i++
		}
		key := s[ks:i]
		if key == "" {
			return fmt.Errorf("malformed 'tags' parameter %q: unexpected character at %d", s, i)
		}
		if i >= len(s) || s[i] != '=' {
			if i < len(s) && s[i] == '"' {
				return fmt.Errorf("malformed 'tags' parameter %q: unexpected quote at %d", s, i)
			}
			into[key] = "true"
			continue
		}
		i++ // '='
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				c := s[i]
				if c == '\\' && i+1 < len(s) {
					switch s[i+1] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(s[i+1])
					}
					i += 2
					continue
				}
				if c == '"' {
					closed = true
					i++
					break
				}
				r, size := utf8.DecodeRuneInString(s[i:])
				b.WriteRune(r)
				i += size
			}
			if !closed {
				return fmt.Errorf("malformed 'tags' parameter %q: unterminated quote", s)
			}
			into[key] = b.String()
			continue
		}
		vs := i
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' {
			i++
		}
		into[key] = s[vs:i]
	}
}

func (a *JaegerAPI) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if ids := q["traceID"]; len(ids) > 0 {
		a.lookup(w, r, ids)
		return
	}
	req, err := ParseSearch(q, a.now())
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var t truncation
	traces, err := a.search1(r.Context(), req, &t)
	if err != nil {
		a.internalError(w, "search", err)
		return
	}
	var resp jaegerResponse
	if t.apply(w, &resp) {
		a.truncated(r.Context())
	}
	writeTraces(w, http.StatusOK, resp, traces)
}

// Search runs a parsed search and draws its results, within the engine's budgets (Config):
// a truncated result says so in its warnings (see Render).
func (a *JaegerAPI) Search(ctx context.Context, req SearchRequest) ([]JaegerTrace, error) {
	var t truncation
	return a.search1(ctx, req, &t)
}

func (a *JaegerAPI) search1(ctx context.Context, req SearchRequest, t *truncation) ([]JaegerTrace, error) {
	graphs, err := a.engine.Search(ctx, req.Query, req.Mode.Link)
	if err != nil {
		return nil, err
	}
	b := newRenderBudget(ctx, a.cfg.MaxRenderBytes)
	out := make([]JaegerTrace, 0, len(graphs))
	left := 0
	for _, g := range graphs {
		t.add(g.Truncated)
		if b.exhausted {
			left++
			continue
		}
		id := newDisplayID(req.Mode, req.Query.From, req.Query.To, g.AnchorObject, g.Anchor.TraceID)
		tr := renderWithin(g, req.Mode.Display, id.TraceID(), b)
		if !durationOK(tr, req.MinDuration, req.MaxDuration) {
			continue
		}
		out = append(out, tr)
	}
	if b.exhausted {
		msg := b.message()
		if left > 0 {
			msg += fmt.Sprintf(" (%d more results left out)", left)
		}
		t.add(msg)
	}
	return out, nil
}

func durationOK(tr JaegerTrace, lo, hi time.Duration) bool {
	if len(tr.Spans) == 0 || (lo == 0 && hi == 0) {
		return true
	}
	d := time.Duration(tr.Spans[0].Duration) * time.Microsecond
	return d >= lo && (hi == 0 || d <= hi)
}

// ErrTraceNotFound is the answer for an ID that resolves to nothing.
var ErrTraceNotFound = errors.New("trace not found")

// ErrBadTraceID is wrapped by Trace for an ID that cannot be decoded.
var ErrBadTraceID = errors.New("bad trace ID")

// Trace resolves a display ID (or a stored trace ID, shown in the default mode over its window)
// and draws it. It returns an error wrapping ErrTraceNotFound or ErrBadTraceID for unknown or
// malformed IDs.
func (a *JaegerAPI) Trace(ctx context.Context, id trace.TraceID) (JaegerTrace, error) {
	return a.trace(ctx, id, newRenderBudget(ctx, a.cfg.MaxRenderBytes))
}

// trace is Trace within the render budget b, which several lookups may share.
func (a *JaegerAPI) trace(ctx context.Context, id trace.TraceID, b *renderBudget) (JaegerTrace, error) {
	g, display, err := a.resolve(ctx, id)
	if err != nil {
		return JaegerTrace{}, err
	}
	return renderWithin(g, display, id, b), nil
}

// resolve finds the graph a display ID (or a stored trace ID, shown in the default mode over its
// window) names, and the display mode to draw it in. It returns an error wrapping
// ErrTraceNotFound or ErrBadTraceID for unknown or malformed IDs.
func (a *queryAPI) resolve(ctx context.Context, id trace.TraceID) (*Graph, displayMode, error) {
	d, err := parseDisplayID(id)
	if errors.Is(err, errNotDisplayID) {
		return a.storedAsDisplay(ctx, id)
	}
	if err != nil {
		// A stored trace ID may start with ff too.
		if g, display, serr := a.storedAsDisplay(ctx, id); serr == nil {
			return g, display, nil
		}
		return nil, 0, fmt.Errorf("%w: %w", ErrBadTraceID, err)
	}
	if d.Legacy {
		return a.legacyTrace(ctx, id, d)
	}
	ref, anchor, err := a.engine.findAnchor(ctx, d.Object, d.Start, d.End)
	if errors.Is(err, errNoObject) {
		return a.storedAsDisplay(ctx, id)
	}
	if err != nil {
		return nil, 0, err
	}
	g, err := a.engine.expand(ctx, ref, anchor, d.Start, d.End, d.Mode.Link)
	if errors.Is(err, errNoObject) {
		return a.storedAsDisplay(ctx, id)
	}
	if err != nil {
		return nil, 0, err
	}
	return g, d.Mode.Display, nil
}

// legacyTrace resolves a display ID of the earlier layout by the prefix of its anchor's stored
// trace ID, on stores that support it.
func (a *queryAPI) legacyTrace(ctx context.Context, id trace.TraceID, d displayID) (*Graph, displayMode, error) {
	refs, err := a.reader.FindTraces(ctx, store.TraceQuery{IDPrefix: d.LegacyAnchor[:], From: d.Start, To: d.End})
	if errors.Is(err, errors.ErrUnsupported) {
		return nil, 0, fmt.Errorf("%w: display ID %s of an earlier release: this store cannot resolve it (search again)", ErrTraceNotFound, id)
	}
	if err != nil {
		return nil, 0, err
	}
	for _, tr := range refs {
		if tr.Object.Resource == "" || tr.Object.Name == "" {
			continue // not an aggregator trace: the index cannot name its object
		}
		g, err := a.engine.expand(ctx, tr.Object, store.ObjectWindow{Window: tr.Window, TraceID: tr.TraceID}, d.Start, d.End, d.Mode.Link)
		if errors.Is(err, errNoObject) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		return g, d.Mode.Display, nil
	}
	return a.storedAsDisplay(ctx, id)
}

func (a *queryAPI) storedAsDisplay(ctx context.Context, id trace.TraceID) (*Graph, displayMode, error) {
	spans, err := a.reader.GetTrace(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, ErrTraceNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	sp := spans[0]
	window := sp.Window
	if window.IsZero() {
		window = aggregator.WindowStart(sp.Start, a.engine.window)
	}
	from, to := window, window.Add(a.engine.window).Add(-time.Nanosecond)
	g, err := a.engine.expand(ctx, sp.Object, store.ObjectWindow{Window: window, TraceID: id}, from, to, DefaultMode.Link)
	if errors.Is(err, errNoObject) {
		return nil, 0, ErrTraceNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	return g, DefaultMode.Display, nil
}

func (a *JaegerAPI) getTrace(w http.ResponseWriter, r *http.Request) {
	if s := r.PathValue("traceID"); len(s) > 32 {
		ids, err := parseMergeID(s)
		if err != nil {
			jaegerError(w, http.StatusBadRequest, "%v", err)
			return
		}
		a.writeMerge(w, r, ids)
		return
	}
	id, err := ParseTraceID(r.PathValue("traceID"))
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	tr, err := a.Trace(r.Context(), id)
	a.writeOneTrace(w, r, tr, err, "get trace", jaegerTraceID(id))
}

// writeOneTrace answers with tr, or with the error err that getting the trace (called idStr)
// gave: 400 for a bad ID or merge, 404 when it is not stored, 500 otherwise (what names the
// operation in the log).
func (a *JaegerAPI) writeOneTrace(w http.ResponseWriter, r *http.Request, tr JaegerTrace, err error, what, idStr string) {
	switch {
	case errors.Is(err, errBadMerge), errors.Is(err, ErrBadTraceID):
		jaegerError(w, http.StatusBadRequest, "%v", err)
	case errors.Is(err, ErrTraceNotFound):
		writeJSON(w, http.StatusNotFound, jaegerResponse{Errors: []JaegerError{{Code: http.StatusNotFound, Msg: err.Error(), TraceID: idStr}}})
	case err != nil:
		a.internalError(w, what, err)
	default:
		resp := jaegerResponse{Total: 1}
		var t truncation
		t.fromTraces([]JaegerTrace{tr})
		if t.apply(w, &resp) {
			a.truncated(r.Context())
		}
		writeTraces(w, http.StatusOK, resp, []JaegerTrace{tr})
	}
}

// lookup answers GET /api/traces?traceID=...: found traces in data, the others as errors.
func (a *JaegerAPI) lookup(w http.ResponseWriter, r *http.Request, ids []string) {
	resp := jaegerResponse{Data: []JaegerTrace{}}
	var traces []JaegerTrace
	b := newRenderBudget(r.Context(), a.cfg.MaxRenderBytes)
	left := 0
	for _, s := range ids {
		if b.exhausted {
			left++
			continue
		}
		var tr JaegerTrace
		var id trace.TraceID
		var err error
		if len(s) > 32 {
			var ids []trace.TraceID
			if ids, err = parseMergeID(s); err != nil {
				jaegerError(w, http.StatusBadRequest, "%v", err)
				return
			}
			tr, err = a.mergeTrace(r.Context(), ids, b)
		} else {
			if id, err = ParseTraceID(s); err != nil {
				jaegerError(w, http.StatusBadRequest, "%v", err)
				return
			}
			tr, err = a.trace(r.Context(), id, b)
		}
		switch {
		case errors.Is(err, ErrBadTraceID), errors.Is(err, errBadMerge):
			jaegerError(w, http.StatusBadRequest, "%v", err)
			return
		case errors.Is(err, ErrTraceNotFound):
			resp.Errors = append(resp.Errors, JaegerError{Msg: err.Error(), TraceID: lookupID(s, id)})
		case err != nil:
			a.internalError(w, "get trace", err)
			return
		default:
			traces = append(traces, tr)
		}
	}
	if traces != nil {
		resp.Data = traces
	}
	var t truncation
	t.fromTraces(traces)
	if left > 0 {
		t.add(fmt.Sprintf("%s (%d more traces left out)", b.message(), left))
	}
	if t.apply(w, &resp) {
		a.truncated(r.Context())
	}
	writeJSON(w, http.StatusOK, resp)
}

// redirect resolves object coordinates and a time (RFC 3339 or Unix microseconds; ts is an
// alias; default now) to the trace page of that object over the window around that time.
func (a *JaegerAPI) redirect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("resource") == "" || q.Get("name") == "" {
		jaegerError(w, http.StatusBadRequest, "parameters 'resource' and 'name' are required")
		return
	}
	mode, err := ParseMode(q.Get("mode"))
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ts := q.Get("time")
	if ts == "" {
		ts = q.Get("ts")
	}
	at := a.now()
	if ts != "" {
		if at, err = parseTime(ts); err != nil {
			jaegerError(w, http.StatusBadRequest, "bad time: %v", err)
			return
		}
	}
	win := a.engine.window
	from, to := clampTime(before(at, win).Truncate(time.Second)).UTC(), clampTime(at.Add(win).Truncate(time.Second)).UTC()
	found, err := a.reader.FindObjects(r.Context(), store.ObjectQuery{
		Cluster: q.Get("cluster"), Group: q.Get("group"), Resource: q.Get("resource"),
		Namespace: q.Get("namespace"), Name: q.Get("name"), From: from, To: to, Limit: 1,
	})
	if err != nil {
		a.internalError(w, "find objects", err)
		return
	}
	if len(found) == 0 || len(found[0].Windows) == 0 {
		jaegerError(w, http.StatusNotFound, "no object %s/%s in %s..%s", q.Get("resource"), q.Get("name"), from.Format(time.RFC3339), to.Format(time.RFC3339))
		return
	}
	id := newDisplayID(mode, from, to, found[0].Object.Key(), found[0].Windows[0].TraceID)
	http.Redirect(w, r, "/trace/"+id.String(), http.StatusFound)
}

// lookupID names a looked-up ID in an error: a merge ID as given, a trace ID as Jaeger writes it.
func lookupID(s string, id trace.TraceID) string {
	if len(s) > 32 {
		return s
	}
	return jaegerTraceID(id)
}

// defaultDependencyLookback is the range of a dependency request without lookback, as Jaeger
// Query has it.
const defaultDependencyLookback = 24 * time.Hour

// dependencies answers Jaeger Query's GET /api/dependencies: the edges of Engine.Dependencies
// within [endTs-lookback, endTs] (milliseconds; endTs defaults to now, lookback to 24h).
func (a *JaegerAPI) dependencies(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	end, lookback := a.now(), defaultDependencyLookback
	if v := q.Get("endTs"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			jaegerError(w, http.StatusBadRequest, "endTs %q: want milliseconds since the Unix epoch", v)
			return
		}
		end = time.UnixMilli(ms)
	}
	if v := q.Get("lookback"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			jaegerError(w, http.StatusBadRequest, "lookback %q: want a positive number of milliseconds", v)
			return
		}
		lookback = time.Duration(ms) * time.Millisecond
	}
	deps, err := a.engine.Dependencies(r.Context(), end.Add(-lookback), end)
	if err != nil {
		a.internalError(w, "dependencies", err)
		return
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: deps, Total: len(deps)})
}
