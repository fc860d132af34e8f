package storageapi

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Requests are decoded by the listener's own code, not by gRPC's codec, so that one the server
// cannot decode (malformed, or nested deeper than protobuf's recursion limit) is answered
// InvalidArgument, the client's error. gRPC answers Internal for any codec error, and for a
// streaming call it sends that status from RecvMsg itself, before an interceptor could change
// it. So the server's codec (rawCodec) hands the request's bytes over as a rawRequest, and the
// handlers decode them: unary methods through their decode function (inputErrors), streams
// through RecvMsg (decodeStream).

// rawRequest is a request's encoded bytes, as rawCodec hands them over.
type rawRequest struct{ data []byte }

// rawCodec is gRPC's proto codec, except that it copies the bytes of a request received into a
// *rawRequest instead of decoding them.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		r.data = data.Materialize() // data is freed after Unmarshal returns
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

// decodeRequest decodes raw into m, answering InvalidArgument when it cannot.
func decodeRequest(raw *rawRequest, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "decode request: %T is not a protobuf message", m)
	}
	if err := proto.Unmarshal(raw.data, pm); err != nil {
		return status.Error(codes.InvalidArgument, fmt.Sprintf("decode request: %v", err))
	}
	return nil
}

// receive reads the next request of recv (a decode function or a stream's RecvMsg) into m.
func receive(recv func(any) error, m any) error {
	var raw rawRequest
	if err := recv(&raw); err != nil {
		return err
	}
	return decodeRequest(&raw, m)
}

// inputErrors registers services whose unary methods decode their requests with decodeRequest.
type inputErrors struct{ grpc.ServiceRegistrar }

func (r inputErrors) RegisterService(desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i := range d.Methods {
		h := d.Methods[i].Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(m any) error { return receive(dec, m) }, in)
		}
	}
	r.ServiceRegistrar.RegisterService(&d, impl)
}

// decodeStream makes every stream (of every service) decode its requests with decodeRequest.
func decodeStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, decodingStream{ss})
}

type decodingStream struct{ grpc.ServerStream }

func (s decodingStream) RecvMsg(m any) error { return receive(s.ServerStream.RecvMsg, m) }
