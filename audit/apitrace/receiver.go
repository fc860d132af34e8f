package apitrace

import (
	"context"
	"net/http"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/kelemetry/kelemetry/internal/otlpin"
)

// receiver serves OTLP trace requests (OTLP/HTTP at POST /v1/traces, protobuf or JSON, gzip or
// not; OTLP/gRPC's TraceService/Export) into a joiner. It is an httpserver.Handler of the OTLP
// listener.
type receiver struct {
	j    *joiner
	dump *dumper
	max  int
	grpc *grpc.Server
}

// traceService is the gRPC TraceService of a receiver.
type traceService struct {
	r *receiver
	coltracepb.UnimplementedTraceServiceServer
}

// newReceiver returns the receiver of j; d, when set, records each accepted request.
func newReceiver(j *joiner, d *dumper) *receiver {
	r := &receiver{j: j, dump: d, max: j.cfg.MaxRequestBytes}
	r.grpc = grpc.NewServer(grpc.MaxRecvMsgSize(r.max))
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	return r
}

// Register mounts POST /v1/traces and the gRPC TraceService.
func (r *receiver) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	mux.Handle("POST /opentelemetry.proto.collector.trace.v1.TraceService/Export", r.grpc)
}

// Export is the gRPC TraceService's method.
func (s traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	resp, err := s.r.accept(ctx, req)
	return resp, otlpin.GRPCError(err)
}

func (r *receiver) accept(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	spans, bad := spansOf(req)
	if err := r.j.accept(ctx, spans, bad); err != nil {
		return nil, err
	}
	r.dump.write(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	otlpin.ServeHTTP(w, req, r.max, func() *coltracepb.ExportTraceServiceRequest { return &coltracepb.ExportTraceServiceRequest{} }, r.accept)
}
