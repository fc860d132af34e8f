package storageapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

// meterScope names the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/storageapi"

// server implements jaeger.storage.v2 TraceReader and DependencyReader over the frontend's
// query engine, within its budgets (frontend.Config): searches, trace lookups and dependency
// graphs count as heavy requests (MaxConcurrent, MaxMemoryBytes, QueueWait) until their answer
// is sent, are bounded by Timeout and read at most MaxSpans spans; rendered traces are bounded by
// MaxRenderBytes and say so in their span warnings when truncated.
type server struct {
	storagev2.UnimplementedTraceReaderServer
	storagev2.UnimplementedDependencyReaderServer

	engine *frontend.Engine
	api    *query.JaegerAPI
	cfg    query.Config
	logger *slog.Logger
	now    func() time.Time

	rejected metric.Int64Counter
}

// newServer serves the engine's merged trees. Register it on a grpc.Server with Register.
func newServer(e *frontend.Engine, tel telemetry.Settings) *server {
	m := instrument.NewMeter(tel, meterScope)
	s := &server{
		engine: e,
		api:    query.NewJaegerAPI(e, tel),
		cfg:    e.Config(),
		logger: tel.Log().With("component", "storageapi"),
		now:    time.Now,
		rejected: m.Counter("kelemetry.storageapi.queries.rejected",
			"Heavy jaeger.storage.v2 requests refused (ResourceExhausted) because no turn came within QueueWait: frontend.Config.MaxConcurrent were running (reason concurrency) or their memory budget MaxMemoryBytes had no room (reason memory).", "{query}",
			instrument.Sets("reason", "concurrency", "memory")...),
	}
	if err := m.Err(); err != nil {
		s.logger.Warn("storageapi metrics", "error", err)
	}
	return s
}

// Register adds the TraceReader and DependencyReader services to g.
func (s *server) Register(g grpc.ServiceRegistrar) {
	storagev2.RegisterTraceReaderServer(g, s)
	storagev2.RegisterDependencyReaderServer(g, s)
}

// heavy bounds ctx by the frontend's Timeout and admits the request among the frontend's heavy
// requests (frontend.Engine.Admit: a turn and its memory estimate); the returned context
// carries the admission, so that what the request reads and draws is charged to it. Call done
// once the answer is sent: the drawn result is held until then.
func (s *server) heavy(ctx context.Context) (_ context.Context, done func(), _ error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	ctx, release, err := s.engine.Admit(ctx)
	if err != nil {
		cancel()
		if errors.Is(err, query.ErrBusy) {
			s.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", query.BusyReason(err))))
			return nil, nil, status.Errorf(codes.ResourceExhausted, "%v: try again later", err)
		}
		return nil, nil, s.status(ctx, "wait for a turn", err)
	}
	return ctx, func() { release(); cancel() }, nil
}

// status maps an error of the engine to a gRPC status; ctx is the request's, to tell the time
// budget from the others.
func (s *server) status(ctx context.Context, what string, err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", what, err)
	case errors.Is(err, query.ErrBudget) && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", what, err)
	case errors.Is(err, query.ErrBudget):
		return status.Errorf(codes.ResourceExhausted, "%s: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: time budget of %s reached; narrow the time range", what, s.cfg.Timeout)
	case errors.Is(err, query.ErrBadTraceID):
		return status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	case errors.Is(err, store.ErrUnavailable):
		return status.Errorf(codes.Unavailable, "%s: %v", what, err)
	default:
		s.logger.Error(what, "error", err)
		return status.Errorf(codes.Internal, "%s: %v", what, err)
	}
}

// GetServices lists the display modes, the default first.
func (s *server) GetServices(context.Context, *storagev2.GetServicesRequest) (*storagev2.GetServicesResponse, error) {
	modes := query.Modes()
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.Name()
	}
	return &storagev2.GetServicesResponse{Services: names}, nil
}

// GetOperations lists the clusters of a display mode, each with the requested span kind.
func (s *server) GetOperations(ctx context.Context, req *storagev2.GetOperationsRequest) (*storagev2.GetOperationsResponse, error) {
	if _, err := query.ParseMode(req.GetService()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "service: %v", err)
	}
	cl, err := s.engine.Reader().Clusters(ctx)
	if err != nil {
		return nil, s.status(ctx, "list clusters", err)
	}
	ops := make([]*storagev2.Operation, len(cl))
	for i, c := range cl {
		ops[i] = &storagev2.Operation{Name: c, SpanKind: req.GetSpanKind()}
	}
	return &storagev2.GetOperationsResponse{Operations: ops}, nil
}

// searchParams turns a storage query into the parameters of the Jaeger HTTP API's search, so
// that both APIs parse searches alike (query.ParseSearch).
func searchParams(q *storagev2.TraceQueryParameters) (url.Values, error) {
	if q == nil {
		return nil, errors.New("query is required")
	}
	v := url.Values{}
	v.Set("service", q.GetServiceName())
	v.Set("operation", q.GetOperationName())
	if attrs := q.GetAttributes(); len(attrs) > 0 {
		tags := make(map[string]string, len(attrs))
		for _, kv := range attrs {
			s, err := attrValue(kv.GetValue())
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", kv.GetKey(), err)
			}
			tags[kv.GetKey()] = s
		}
		b, err := json.Marshal(tags)
		if err != nil {
			return nil, fmt.Errorf("attributes: %w", err)
		}
		v.Set("tags", string(b))
	}
	for _, p := range []struct {
		name string
		ts   *timestamppb.Timestamp
	}{{"start", q.GetStartTimeMin()}, {"end", q.GetStartTimeMax()}} {
		if p.ts == nil {
			continue
		}
		if err := p.ts.CheckValid(); err != nil {
			return nil, fmt.Errorf("%s time: %w", p.name, err)
		}
		v.Set(p.name, strconv.FormatInt(p.ts.AsTime().UnixMicro(), 10))
	}
	for _, p := range []struct {
		name string
		d    interface {
			CheckValid() error
			AsDuration() time.Duration
		}
		set bool
	}{{"minDuration", q.GetDurationMin(), q.GetDurationMin() != nil}, {"maxDuration", q.GetDurationMax(), q.GetDurationMax() != nil}} {
		if !p.set {
			continue
		}
		if err := p.d.CheckValid(); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		if d := p.d.AsDuration(); d != 0 {
			v.Set(p.name, d.String())
		}
	}
	if n := q.GetSearchDepth(); n != 0 {
		v.Set("limit", strconv.Itoa(int(n)))
	}
	return v, nil
}

// attrValue is the string form of a search attribute's value, as the HTTP API receives it.
func attrValue(v *storagev2.AnyValue) (string, error) {
	switch x := v.GetValue().(type) {
	case *storagev2.AnyValue_StringValue:
		return x.StringValue, nil
	case *storagev2.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue), nil
	case *storagev2.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10), nil
	case *storagev2.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64), nil
	case nil:
		return "", errors.New("no value")
	default:
		return "", fmt.Errorf("value of type %T cannot be searched; use a string", x)
	}
}

// search runs a storage query as the HTTP API's search, admitted as a heavy request: call done
// once the traces are sent (the admission holds their memory until then).
func (s *server) search(ctx context.Context, q *storagev2.TraceQueryParameters) (_ []query.JaegerTrace, done func(), _ error) {
	params, err := searchParams(q)
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	req, err := query.ParseSearch(params, s.now())
	if err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	ctx, done, err = s.heavy(ctx)
	if err != nil {
		return nil, nil, err
	}
	traces, err := s.api.Search(ctx, req)
	if err != nil {
		done()
		return nil, nil, s.status(ctx, "search", err)
	}
	return traces, done, nil
}

// FindTraces streams the merged trees of the objects a search finds, one result after the
// other (a result may span several consecutive messages).
func (s *server) FindTraces(req *storagev2.FindTracesRequest, stream grpc.ServerStreamingServer[tracev1.TracesData]) error {
	traces, done, err := s.search(stream.Context(), req.GetQuery())
	if err != nil {
		return err
	}
	defer done()
	for _, tr := range traces {
		id, err := query.ParseTraceID(tr.TraceID)
		if err != nil {
			return s.status(stream.Context(), "search", err)
		}
		if err := s.send(stream, id, tr); err != nil {
			return err
		}
	}
	return nil
}

// FindTraceIDs answers the display IDs of a search's results with their time ranges.
func (s *server) FindTraceIDs(ctx context.Context, req *storagev2.FindTracesRequest) (*storagev2.FindTraceIDsResponse, error) {
	traces, done, err := s.search(ctx, req.GetQuery())
	if err != nil {
		return nil, err
	}
	defer done()
	out := &storagev2.FindTraceIDsResponse{TraceIds: make([]*storagev2.FoundTraceID, 0, len(traces))}
	for _, tr := range traces {
		id, err := query.ParseTraceID(tr.TraceID)
		if err != nil {
			return nil, s.status(ctx, "search", err)
		}
		f := &storagev2.FoundTraceID{TraceId: id[:]}
		if len(tr.Spans) > 0 {
			lo, hi := tr.Spans[0].StartTime, tr.Spans[0].StartTime+tr.Spans[0].Duration
			for _, sp := range tr.Spans[1:] {
				lo, hi = min(lo, sp.StartTime), max(hi, sp.StartTime+sp.Duration)
			}
			f.Start, f.End = timestamppb.New(time.UnixMicro(lo)), timestamppb.New(time.UnixMicro(hi))
		}
		out.TraceIds = append(out.TraceIds, f)
	}
	return out, nil
}

// GetTraces streams the merged trees of display IDs (or stored trace IDs, shown in the default
// mode), as the HTTP API's /api/traces/{id} draws them. Unknown IDs are skipped.
func (s *server) GetTraces(req *storagev2.GetTracesRequest, stream grpc.ServerStreamingServer[tracev1.TracesData]) error {
	ids := make([]trace.TraceID, len(req.GetQuery()))
	for i, q := range req.GetQuery() {
		if len(q.GetTraceId()) != len(ids[i]) {
			return status.Errorf(codes.InvalidArgument, "query %d: trace ID of %d bytes, want 16", i, len(q.GetTraceId()))
		}
		copy(ids[i][:], q.GetTraceId())
	}
	if len(ids) == 0 {
		return nil
	}
	ctx, done, err := s.heavy(stream.Context())
	if err != nil {
		return err
	}
	defer done()
	for _, id := range ids {
		tr, err := s.api.Trace(ctx, id)
		if errors.Is(err, query.ErrTraceNotFound) {
			continue
		}
		if err != nil {
			return s.status(ctx, "get trace "+id.String(), err)
		}
		if err := s.send(stream, id, tr); err != nil {
			return err
		}
	}
	return nil
}

// send streams one drawn trace under the ID it was asked by.
// Each message is converted just before it is sent (eachChunk): an OTLP copy of a large trace
// is never held whole.
func (s *server) send(stream grpc.ServerStreamingServer[tracev1.TracesData], id trace.TraceID, tr query.JaegerTrace) error {
	var sendErr error
	err := eachChunk(slices.Clone(id[:]), tr, func(c *tracev1.TracesData) error {
		sendErr = stream.Send(c)
		return sendErr
	})
	switch {
	case sendErr != nil:
		return sendErr
	case err != nil:
		return s.status(stream.Context(), "convert trace "+id.String(), err)
	}
	return nil
}

// GetDependencies answers the graph of object kinds (resources) and how objects link within
// [start_time, end_time]: an edge parent -> child for every resource pair, with the number of
// distinct linked object pairs as its call count (query.Engine.Dependencies).
func (s *server) GetDependencies(ctx context.Context, req *storagev2.GetDependenciesRequest) (*storagev2.GetDependenciesResponse, error) {
	from, to, err := depRange(req, s.now())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	ctx, done, err := s.heavy(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	deps, err := s.engine.Dependencies(ctx, from, to)
	if err != nil {
		return nil, s.status(ctx, "dependencies", err)
	}
	edges := make([]*storagev2.Dependency, len(deps))
	for i, d := range deps {
		edges[i] = &storagev2.Dependency{Parent: d.Parent, Child: d.Child, CallCount: d.CallCount, Source: "kelemetry"}
	}
	return &storagev2.GetDependenciesResponse{Dependencies: edges}, nil
}

// defaultDependencyLookback is the range of a dependency request without a start time.
const defaultDependencyLookback = 24 * time.Hour

func depRange(req *storagev2.GetDependenciesRequest, now time.Time) (from, to time.Time, err error) {
	to = now
	if ts := req.GetEndTime(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return from, to, fmt.Errorf("end time: %w", err)
		}
		to = ts.AsTime()
	}
	from = to.Add(-defaultDependencyLookback)
	if ts := req.GetStartTime(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return from, to, fmt.Errorf("start time: %w", err)
		}
		from = ts.AsTime()
	}
	if to.Before(from) {
		return from, to, errors.New("end time is before start time")
	}
	return from, to, nil
}
