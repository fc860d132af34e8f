package apitrace

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// retryAfter is how long a sender refused for ErrFull is asked to wait.
const retryAfter = time.Second

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
	if err := s.r.accept(ctx, req); err != nil {
		if errors.Is(err, errFull) {
			st := status.New(codes.ResourceExhausted, err.Error())
			if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
				st = d
			}
			return nil, st.Err()
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) accept(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) error {
	spans, bad := spansOf(req)
	if err := r.j.accept(ctx, spans, bad); err != nil {
		return err
	}
	r.dump.write(req)
	return nil
}

func (r *receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := readBody(w, req, r.max)
	if err != nil {
		code := http.StatusBadRequest
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	ct, _, _ := strings.Cut(req.Header.Get("Content-Type"), ";")
	msg := &coltracepb.ExportTraceServiceRequest{}
	jsonBody := strings.TrimSpace(ct) == "application/json"
	if jsonBody {
		err = unmarshalJSON(body, msg)
	} else {
		err = proto.Unmarshal(body, msg)
	}
	if err != nil {
		http.Error(w, "decode the OTLP trace request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := r.accept(req.Context(), msg); err != nil {
		if errors.Is(err, errFull) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp := &coltracepb.ExportTraceServiceResponse{}
	var out []byte
	if jsonBody {
		w.Header().Set("Content-Type", "application/json")
		out, _ = protojson.Marshal(resp)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ = proto.Marshal(resp)
	}
	_, _ = w.Write(out)
}

// readBody reads a request body of at most max bytes after gzip decompression.
func readBody(w http.ResponseWriter, req *http.Request, max int) ([]byte, error) {
	var rd io.Reader = http.MaxBytesReader(w, req.Body, int64(max))
	switch strings.ToLower(req.Header.Get("Content-Encoding")) {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer func() { _ = zr.Close() }()
		rd = io.LimitReader(zr, int64(max)+1)
	default:
		return nil, fmt.Errorf("content encoding %q: only gzip is supported", req.Header.Get("Content-Encoding"))
	}
	body, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if len(body) > max {
		return nil, &http.MaxBytesError{Limit: int64(max)}
	}
	return body, nil
}

// unmarshalJSON decodes an OTLP/JSON trace request. OTLP/JSON writes trace and span IDs in hex,
// where protobuf's JSON mapping expects base64: they are rewritten before decoding.
func unmarshalJSON(b []byte, msg *coltracepb.ExportTraceServiceRequest) error {
	fixed, err := rewriteIDs(b, hexToBase64)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(fixed, msg)
}

// idKeys are the OTLP/JSON members that hold IDs in hex.
var idKeys = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

func hexToBase64(s string) (string, bool) {
	raw, err := hex.DecodeString(s)
	if err != nil {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(raw), true
}

func base64ToHex(s string) (string, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", false
	}
	return hex.EncodeToString(raw), true
}

// rewriteIDs rewrites the ID members of an OTLP/JSON document with conv (values it cannot
// convert are kept), writing the document compactly.
func rewriteIDs(b []byte, conv func(string) (string, bool)) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	idNext := false
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP/JSON: %w", err)
		}
		if tok.Kind() == '"' {
			s := tok.String()
			kind, n := dec.StackIndex(dec.StackDepth())
			isName := kind == '{' && n%2 == 1
			if isName {
				idNext = idKeys[s]
			} else if idNext {
				idNext = false
				if v, ok := conv(s); ok {
					tok = jsontext.String(v)
				}
			}
		} else {
			idNext = false
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, fmt.Errorf("OTLP/JSON: %w", err)
		}
	}
	return out.Bytes(), nil
}
