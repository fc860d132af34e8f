package store

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/telemetry"
)

// fakeJaeger is an OTLP receiver and a jaeger.storage.v2 reader over the spans it received,
// with the matching rules of Jaeger's memory backend: a span written twice is kept twice, a
// search matches a trace when one span has the service, every attribute (by string form, on the
// span or one of its events) and a start within the bounds; newest traces first. For unit tests;
// the end-to-end tests run real Jaeger.
type fakeJaeger struct {
	storagev2.UnimplementedTraceReaderServer
	collectortrace.UnimplementedTraceServiceServer

	mu     sync.Mutex
	traces map[string][]*tracev1.ResourceSpans // by trace ID bytes
	order  []string                            // trace IDs, oldest first
	spans  int
	calls  map[string]int

	addr string
	srv  *grpc.Server
}

func newFakeJaeger(t *testing.T) *fakeJaeger {
	t.Helper()
	f := &fakeJaeger{traces: map[string][]*tracev1.ResourceSpans{}, calls: map[string]int{}}
	f.start(t, "127.0.0.1:0")
	return f
}

func (f *fakeJaeger) start(t *testing.T, addr string) {
	t.Helper()
	var lis net.Listener
	var err error
	for range 50 { // a restart may wait for the port to be free
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	f.addr = lis.Addr().String()
	f.srv = grpc.NewServer()
	storagev2.RegisterTraceReaderServer(f.srv, f)
	collectortrace.RegisterTraceServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(lis) }()
	t.Cleanup(f.srv.Stop)
}

// stop stops serving (the backend goes down); start(t, f.addr) brings it back with its data.
func (f *fakeJaeger) stop() { f.srv.Stop() }

func (f *fakeJaeger) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				id := string(sp.GetTraceId())
				if _, ok := f.traces[id]; !ok {
					f.order = append(f.order, id)
				}
				one := &tracev1.ResourceSpans{Resource: rs.GetResource(), ScopeSpans: []*tracev1.ScopeSpans{{Scope: ss.GetScope(), Spans: []*tracev1.Span{sp}}}}
				f.traces[id] = append(f.traces[id], one)
				f.spans++
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (f *fakeJaeger) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeJaeger) received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spans
}

func (f *fakeJaeger) GetTraces(req *storagev2.GetTracesRequest, stream grpc.ServerStreamingServer[tracev1.TracesData]) error {
	f.mu.Lock()
	f.calls["GetTraces"]++
	var out []*tracev1.TracesData
	for _, q := range req.GetQuery() {
		if rss := f.traces[string(q.GetTraceId())]; len(rss) > 0 {
			out = append(out, &tracev1.TracesData{ResourceSpans: slices.Clone(rss)})
		}
	}
	f.mu.Unlock()
	for _, td := range out {
		if err := stream.Send(td); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeJaeger) GetServices(context.Context, *storagev2.GetServicesRequest) (*storagev2.GetServicesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetServices"]++
	var out []string
	for _, rss := range f.traces {
		for _, rs := range rss {
			if s := serviceOf(rs); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return &storagev2.GetServicesResponse{Services: out}, nil
}

func (f *fakeJaeger) GetOperations(_ context.Context, req *storagev2.GetOperationsRequest) (*storagev2.GetOperationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetOperations"]++
	out := &storagev2.GetOperationsResponse{}
	seen := map[string]bool{}
	for _, rss := range f.traces {
		for _, rs := range rss {
			if serviceOf(rs) != req.GetService() {
				continue
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					if !seen[sp.GetName()] {
						seen[sp.GetName()] = true
						out.Operations = append(out.Operations, &storagev2.Operation{Name: sp.GetName()})
					}
				}
			}
		}
	}
	return out, nil
}

func (f *fakeJaeger) FindTraceIDs(_ context.Context, req *storagev2.FindTracesRequest) (*storagev2.FindTraceIDsResponse, error) {
	q := req.GetQuery()
	if q.GetSearchDepth() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "search depth must be greater than 0")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["FindTraceIDs"]++
	out := &storagev2.FindTraceIDsResponse{}
	for i := len(f.order) - 1; i >= 0 && len(out.TraceIds) < int(q.GetSearchDepth()); i-- {
		id := f.order[i]
		for _, rs := range f.traces[id] {
			if q.GetServiceName() != "" && serviceOf(rs) != q.GetServiceName() {
				continue
			}
			if sp := rs.GetScopeSpans()[0].GetSpans()[0]; matchSpan(q, sp) {
				out.TraceIds = append(out.TraceIds, &storagev2.FoundTraceID{TraceId: []byte(id)})
				break
			}
		}
	}
	return out, nil
}

func matchSpan(q *storagev2.TraceQueryParameters, sp *tracev1.Span) bool {
	start := time.Unix(0, int64(sp.GetStartTimeUnixNano())) //nolint:gosec // test data
	if start.Before(q.GetStartTimeMin().AsTime()) || start.After(q.GetStartTimeMax().AsTime()) {
		return false
	}
next:
	for _, want := range q.GetAttributes() {
		for _, kv := range sp.GetAttributes() {
			if kv.GetKey() == want.GetKey() && anyString(kv.GetValue()) == want.GetValue().GetStringValue() {
				continue next
			}
		}
		for _, ev := range sp.GetEvents() {
			for _, kv := range ev.GetAttributes() {
				if kv.GetKey() == want.GetKey() && anyString(kv.GetValue()) == want.GetValue().GetStringValue() {
					continue next
				}
			}
		}
		return false
	}
	return true
}

// jaegerTestStore is a Jaeger store writing into and reading from f; Export returns once f holds
// the spans, so that tests read their writes.
type jaegerTestStore struct {
	*Jaeger
	f       *fakeJaeger
	objects map[aggregator.ObjectKey]map[time.Time]bool
}

// mark notes an object span of key in window w; it reports whether none was noted before.
func (s *jaegerTestStore) mark(key aggregator.ObjectKey, w time.Time) bool {
	if s.objects[key] == nil {
		s.objects[key] = map[time.Time]bool{}
	}
	if s.objects[key][w] {
		return false
	}
	s.objects[key][w] = true
	return true
}

func openJaegerTest(t *testing.T, f *fakeJaeger, mutate func(*JaegerConfig)) *jaegerTestStore {
	t.Helper()
	cfg := JaegerConfig{Endpoint: f.addr, Timeout: 2 * time.Second,
		OTLP: otlpsink.Config{Endpoint: f.addr, FlushInterval: 5 * time.Millisecond, RetryBackoff: 20 * time.Millisecond}}
	if mutate != nil {
		mutate(&cfg)
	}
	j, err := OpenJaeger(context.Background(), cfg, aggregator.Window(win), telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, j.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = j.Stop(ctx)
		_ = j.Close()
	})
	return &jaegerTestStore{Jaeger: j, f: f}
}

// Export writes spans as the aggregator does: with an object span in every window of an object
// (the jaeger backend finds objects by them), here added for windows that have none yet.
func (s *jaegerTestStore) Export(ctx context.Context, spans []*aggregator.Span) error {
	if s.objects == nil {
		s.objects = map[aggregator.ObjectKey]map[time.Time]bool{}
	}
	for _, sp := range spans {
		if sp.Kind == aggregator.KindObject {
			s.mark(sp.Object.Key(), sp.Window)
		}
	}
	for _, sp := range spans {
		if sp.Kind != aggregator.KindObject && s.mark(sp.Object.Key(), sp.Window) {
			spans = append(spans, objectSpan(sp.Object, sp.Window))
		}
	}
	before := s.f.received()
	if err := s.Jaeger.Export(ctx, spans); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.f.received() < before+len(spans) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// skipJaeger skips a shared store test that needs what the jaeger backend does not promise.
func skipJaeger(t *testing.T, s Store, why string) {
	t.Helper()
	if _, ok := s.(*jaegerTestStore); ok {
		t.Skip("jaeger backend: " + why)
	}
}

func otlpConfig(endpoint string) otlpsink.Config { return otlpsink.Config{Endpoint: endpoint} }
