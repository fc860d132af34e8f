// Package otlpin serves OTLP export requests (OTLP/HTTP, protobuf or JSON, gzip or not; the
// answers of OTLP/gRPC) for the receivers on the OTLP listener: kube-apiserver's request traces
// (audit/apitrace) and audit events as logs (audit/otlplogs).
package otlpin

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
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Errors an accept function wraps to choose the answer; any other error answers 500 / INTERNAL.
var (
	// ErrFull: the receiver is at a limit and the sender should retry later (429 with
	// Retry-After; RESOURCE_EXHAUSTED with a RetryInfo, which OTLP exporters retry).
	ErrFull = errors.New("otlp: full")
	// ErrUnavailable: what the receiver writes to cannot take it now (503 with Retry-After;
	// UNAVAILABLE).
	ErrUnavailable = errors.New("otlp: unavailable")
	// ErrTooLarge: the request can never be taken whole (413; INVALID_ARGUMENT): not retried.
	ErrTooLarge = errors.New("otlp: too large")
)

// RetryAfter is the delay a refused sender is asked to wait.
const RetryAfter = time.Second

// ServeHTTP answers one OTLP/HTTP export: it reads the body (at most max bytes after gzip
// decompression), decodes it into newReq() (protobuf, or JSON for Content-Type
// application/json), calls accept, and writes its response in the request's encoding, or the
// answer its error asks for.
func ServeHTTP[Req, Resp proto.Message](w http.ResponseWriter, r *http.Request, max int, newReq func() Req, accept func(context.Context, Req) (Resp, error)) {
	body, err := readBody(w, r, max)
	if err != nil {
		code := http.StatusBadRequest
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	jsonBody := strings.TrimSpace(ct) == "application/json"
	req := newReq()
	if jsonBody {
		err = UnmarshalJSON(body, req)
	} else {
		err = proto.Unmarshal(body, req)
	}
	if err != nil {
		http.Error(w, "decode the OTLP request: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := accept(r.Context(), req)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrFull):
			code = http.StatusTooManyRequests
		case errors.Is(err, ErrUnavailable):
			code = http.StatusServiceUnavailable
		case errors.Is(err, ErrTooLarge):
			code = http.StatusRequestEntityTooLarge
		}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		http.Error(w, err.Error(), code)
		return
	}
	var out []byte
	if jsonBody {
		w.Header().Set("Content-Type", "application/json")
		out, err = MarshalJSON(resp)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, err = proto.Marshal(resp)
	}
	if err != nil {
		http.Error(w, "encode the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(out)
}

// GRPCError is the gRPC status of an accept function's error (nil for nil).
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	var code codes.Code
	switch {
	case errors.Is(err, ErrFull):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrUnavailable):
		code = codes.Unavailable
	case errors.Is(err, ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
	st := status.New(code, err.Error())
	if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryAfter)}); derr == nil {
		st = d
	}
	return st.Err()
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

// UnmarshalJSON decodes an OTLP/JSON message. OTLP/JSON writes trace and span IDs in hex, where
// protobuf's JSON mapping expects base64: they are rewritten before decoding.
func UnmarshalJSON(b []byte, msg proto.Message) error {
	fixed, err := rewriteIDs(b, hexToBase64)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(fixed, msg)
}

// MarshalJSON encodes msg in OTLP/JSON (hex trace and span IDs), on one line.
func MarshalJSON(msg proto.Message) ([]byte, error) {
	b, err := protojson.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return rewriteIDs(b, base64ToHex)
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
			if kind == '{' && n%2 == 1 {
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
	return bytes.TrimSpace(out.Bytes()), nil
}
