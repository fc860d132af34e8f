package storagev2_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/kelemetry/kelemetry/storageapi/storagev2"
)

// The generated files resolve against the real OTLP descriptor, not the codegen placeholder.
func TestDescriptorsResolveRealOTLP(t *testing.T) {
	fd, err := protoregistry.GlobalFiles.FindFileByPath("storage/v2/trace_storage.proto")
	require.NoError(t, err)
	svc := fd.Services().ByName("TraceReader")
	require.NotNil(t, svc)
	out := svc.Methods().ByName("GetTraces").Output()
	assert.Equal(t, "opentelemetry.proto.trace.v1.TracesData", string(out.FullName()))
	assert.NotNil(t, out.Fields().ByName("resource_spans"), "the placeholder TracesData has no fields")

	_, err = protoregistry.GlobalFiles.FindFileByPath("storage/v2/dependency_storage.proto")
	require.NoError(t, err)
}

func TestTracesDataRoundTrip(t *testing.T) {
	in := &tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{
		Spans: []*tracev1.Span{{Name: "deployments/demo", SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
	}}}}}
	b, err := proto.Marshal(in)
	require.NoError(t, err)
	var out tracev1.TracesData
	require.NoError(t, proto.Unmarshal(b, &out))
	assert.True(t, proto.Equal(in, &out))

	req := &storagev2.GetTracesRequest{Query: []*storagev2.GetTraceParams{{TraceId: make([]byte, 16)}}}
	b, err = proto.Marshal(req)
	require.NoError(t, err)
	var back storagev2.GetTracesRequest
	require.NoError(t, proto.Unmarshal(b, &back))
	assert.Len(t, back.GetQuery(), 1)
}
