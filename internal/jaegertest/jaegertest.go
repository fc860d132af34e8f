// Package jaegertest holds an in-process stand-in for a Jaeger backend, for unit tests of code
// that writes OTLP and reads jaeger.storage.v2: it stores what it receives and answers reads with
// the rules of Jaeger's memory backend. End-to-end tests run real Jaeger.
package jaegertest

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelemetry/kelemetry/storageapi/storagev2"
)

// Backend is an OTLP receiver and a jaeger.storage.v2 reader over the spans it received,
// with the matching rules of Jaeger's memory backend: a span written twice is kept twice, a
// search matches a trace when one span has the service, every attribute (by string form, on the
// span or one of its events) and a start within the bounds; newest traces first. For unit tests;
// the end-to-end tests run real Jaeger.
type Backend struct {
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

// New starts a backend on a free loopback port, stopped when the test ends.
func New(t *testing.T) *Backend {
	t.Helper()
	f := &Backend{traces: map[string][]*tracev1.ResourceSpans{}, calls: map[string]int{}}
	f.Start(t, "127.0.0.1:0")
	return f
}

// Start serves on addr ("127.0.0.1:0" for a free port); after Stop, Start(t, b.Addr()) brings
// the backend back with its data.
func (f *Backend) Start(t *testing.T, addr string) {
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

// Stop stops serving: the backend is down.
func (f *Backend) Stop() { f.srv.Stop() }

// Addr is the address the backend serves OTLP and jaeger.storage.v2 on.
func (f *Backend) Addr() string { return f.addr }

func (f *Backend) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
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

// Calls counts the calls of a jaeger.storage.v2 method served so far.
func (f *Backend) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Spans counts the spans received so far.
func (f *Backend) Spans() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spans
}

func (f *Backend) GetTraces(req *storagev2.GetTracesRequest, stream grpc.ServerStreamingServer[tracev1.TracesData]) error {
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

func (f *Backend) GetServices(context.Context, *storagev2.GetServicesRequest) (*storagev2.GetServicesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetServices"]++
	var out []string
	for _, rss := range f.traces {
		for _, rs := range rss {
			if s := service(rs); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return &storagev2.GetServicesResponse{Services: out}, nil
}

func (f *Backend) GetOperations(_ context.Context, req *storagev2.GetOperationsRequest) (*storagev2.GetOperationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GetOperations"]++
	out := &storagev2.GetOperationsResponse{}
	seen := map[string]bool{}
	for _, rss := range f.traces {
		for _, rs := range rss {
			if service(rs) != req.GetService() {
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

func (f *Backend) FindTraceIDs(_ context.Context, req *storagev2.FindTracesRequest) (*storagev2.FindTraceIDsResponse, error) {
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
			if q.GetServiceName() != "" && service(rs) != q.GetServiceName() {
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
	start := time.Unix(0, int64(sp.GetStartTimeUnixNano())) // test data: fits an int64
	if start.Before(q.GetStartTimeMin().AsTime()) || start.After(q.GetStartTimeMax().AsTime()) {
		return false
	}
next:
	for _, want := range q.GetAttributes() {
		for _, kv := range sp.GetAttributes() {
			if kv.GetKey() == want.GetKey() && valueString(kv.GetValue()) == want.GetValue().GetStringValue() {
				continue next
			}
		}
		for _, ev := range sp.GetEvents() {
			for _, kv := range ev.GetAttributes() {
				if kv.GetKey() == want.GetKey() && valueString(kv.GetValue()) == want.GetValue().GetStringValue() {
					continue next
				}
			}
		}
		return false
	}
	return true
}

// service is the service.name of a resource.
func service(rs *tracev1.ResourceSpans) string {
	for _, kv := range rs.GetResource().GetAttributes() {
		if kv.GetKey() == "service.name" {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// valueString is the string form of scalar values, which searches compare.
func valueString(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	default:
		return v.GetStringValue()
	}
}
