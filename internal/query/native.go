package query

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// NativeAPI serves object lookup and stored traces.
type NativeAPI struct {
	reader  store.Reader
	logger  *slog.Logger
	cfg     Config
	limiter *limiter
	metrics queryMetrics
}

// NewNativeAPI serves reader's data within the default budgets of Config and a limit of
// concurrent requests of its own; ShareLimits puts it under an engine's.
func NewNativeAPI(reader store.Reader, tel telemetry.Settings) *NativeAPI {
	cfg := Config{}.WithDefaults()
	return &NativeAPI{reader: reader, logger: tel.Log().With("component", "frontend"), cfg: cfg,
		limiter: cfg.newLimiter(), metrics: newQueryMetrics(tel, "native")}
}

// ShareLimits makes the API use e's budgets and share its limit of concurrent heavy requests
// (Config); call it before Register. It returns a.
func (a *NativeAPI) ShareLimits(e *Engine) *NativeAPI {
	a.cfg, a.limiter = e.Config(), e.limiter
	return a
}

// Register adds the routes to mux. All count as heavy requests (Config.MaxConcurrent).
//
//	GET /api/objects?cluster=&group=&resource=&namespace=&name=&from=&to=&limit=
//	GET /api/stored-traces/{traceID}
//	GET /api/objects/at?cluster=&group=&resource=&namespace=&name=&time=   an objectState
//	GET /api/objects/diff?cluster=&group=&resource=&namespace=&name=&from=&to=   an objectDiff
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/at?time=
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/diff?from=&to=
//	GET /api/objects/history?cluster=&group=&resource=&namespace=&name=&from=&to=   an objectHistory
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/history?from=&to=
//
// In the path forms "-" stands for an empty segment (the core group, no namespace); times of
// the object endpoints are RFC 3339 or Unix milliseconds.
func (a *NativeAPI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/objects", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objects))
	mux.HandleFunc("GET /api/stored-traces/{traceID}", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.storedTrace))
	mux.HandleFunc("GET /api/objects/at", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectAt))
	mux.HandleFunc("GET /api/objects/diff", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectDiff))
	mux.HandleFunc("GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/at", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectAt))
	mux.HandleFunc("GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/diff", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectDiff))
	mux.HandleFunc("GET /api/objects/history", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectHistory))
	mux.HandleFunc("GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/history", heavy(a.limiter, a.metrics, a.cfg.Timeout, a.objectHistory))
}

// readError answers a failed read: 503 when the store is unavailable or the request's time ran
// out; it returns false for other errors, which the caller answers with 500.
func (a *NativeAPI) readError(w http.ResponseWriter, what string, err error) bool {
	if errors.Is(err, store.ErrUnavailable) {
		w.Header().Set("Retry-After", a.limiter.retryAfter())
		writeJSON(w, http.StatusServiceUnavailable, jaegerResponse{Errors: []JaegerError{{Code: http.StatusServiceUnavailable,
			Msg: fmt.Sprintf("%s: %v", what, err)}}})
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		w.Header().Set("Retry-After", a.limiter.retryAfter())
		writeJSON(w, http.StatusServiceUnavailable, jaegerResponse{Errors: []JaegerError{{Code: http.StatusServiceUnavailable,
			Msg: fmt.Sprintf("%s: time budget of %s reached; narrow the time range", what, a.cfg.Timeout)}}})
		return true
	}
	return false
}

// ObjectResult is one object in the answer of GET /api/objects.
type ObjectResult struct {
	aggregator.ObjectRef
	Windows []windowResult `json:"windows"`
}

// windowResult is one stored trace of an object.
type windowResult struct {
	Start   time.Time `json:"start"`
	TraceID string    `json:"traceID"`
}

// ObjectsResponse is the answer of GET /api/objects.
type ObjectsResponse struct {
	Objects []ObjectResult `json:"objects"`
}

func (a *NativeAPI) objects(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	query := store.ObjectQuery{
		Cluster:   q.Get("cluster"),
		Group:     q.Get("group"),
		Resource:  q.Get("resource"),
		Namespace: q.Get("namespace"),
		Name:      q.Get("name"),
	}
	var err error
	if query.From, err = parseTime(q.Get("from")); err != nil {
		httpError(w, http.StatusBadRequest, "bad from: %v", err)
		return
	}
	if query.To, err = parseTime(q.Get("to")); err != nil {
		httpError(w, http.StatusBadRequest, "bad to: %v", err)
		return
	}
	if !query.From.IsZero() && !query.To.IsZero() && query.To.Before(query.From) {
		httpError(w, http.StatusBadRequest, "to is before from")
		return
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			httpError(w, http.StatusBadRequest, "limit must be a number from 1 to 10000")
			return
		}
		query.Limit = n
	}
	found, err := a.reader.FindObjects(r.Context(), query)
	if err != nil {
		if a.readError(w, "find objects", err) {
			return
		}
		a.logger.Error("find objects", "error", err)
		httpError(w, http.StatusInternalServerError, "find objects: %v", err)
		return
	}
	resp := ObjectsResponse{Objects: make([]ObjectResult, 0, len(found))}
	for _, f := range found {
		o := ObjectResult{ObjectRef: f.Object, Windows: make([]windowResult, 0, len(f.Windows))}
		for _, win := range f.Windows {
			o.Windows = append(o.Windows, windowResult{Start: win.Window, TraceID: win.TraceID.String()})
		}
		resp.Objects = append(resp.Objects, o)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *NativeAPI) storedTrace(w http.ResponseWriter, r *http.Request) {
	id, err := ParseTraceID(r.PathValue("traceID"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, jaegerResponse{Errors: []JaegerError{{Code: http.StatusBadRequest, Msg: err.Error()}}})
		return
	}
	spans, err := a.reader.GetTrace(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, jaegerResponse{Errors: []JaegerError{{Code: http.StatusNotFound, Msg: "trace not found", TraceID: id.String()}}})
		return
	case err != nil && a.readError(w, "get trace", err):
		return
	case err != nil:
		a.logger.Error("get trace", "trace", id.String(), "error", err)
		writeJSON(w, http.StatusInternalServerError, jaegerResponse{Errors: []JaegerError{{Code: http.StatusInternalServerError, Msg: err.Error()}}})
		return
	}
	chargeRead(r.Context(), [][]*aggregator.Span{spans}) // one stored trace: counted, not cut
	var t truncation
	if len(spans) > a.cfg.MaxSpans {
		spans = spans[:a.cfg.MaxSpans]
		t.add(spanBudgetMsg(a.cfg.MaxSpans))
	}
	tr := ToJaeger(id, spans)
	b := newRenderBudget(r.Context(), a.cfg.MaxRenderBytes)
	if k := b.takeSpans(tr.Spans, true); k < len(tr.Spans) {
		clear(tr.Spans[k:])
		tr.Spans = tr.Spans[:k]
		t.add(b.message())
	}
	for _, m := range t.msgs {
		markTruncated(&tr, m, false)
	}
	resp := jaegerResponse{Data: []JaegerTrace{tr}}
	if t.apply(w, &resp) {
		a.metrics.truncated.Add(r.Context(), 1, metric.WithAttributes(a.metrics.api))
	}
	writeJSON(w, http.StatusOK, resp)
}

// ParseTraceID accepts 1 to 32 hex digits, as Jaeger does.
func ParseTraceID(s string) (trace.TraceID, error) {
	var id trace.TraceID
	if len(s) == 0 || len(s) > 32 {
		return id, fmt.Errorf("trace ID %q: want 1 to 32 hex digits", s)
	}
	padded := strings.Repeat("0", 32-len(s)) + s
	if _, err := hex.Decode(id[:], []byte(padded)); err != nil {
		return id, fmt.Errorf("trace ID %q: want hex digits", s)
	}
	return id, nil
}

// parseTime accepts RFC 3339 or Unix microseconds (as Jaeger's API uses), clamped to
// [minQueryTime, maxQueryTime].
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := parseMicros("time", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339 or Unix microseconds: %w", err)
	}
	return clampTime(t), nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}
