package storageapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kelemetry/kelemetry/internal/query"
)

// A large trace is split into consecutive messages under the size bound, none empty, every
// span kept once; tags, logs, warnings and the error flag map to their OTLP forms.
func TestChunksSplitLargeTraces(t *testing.T) {
	tr := query.JaegerTrace{TraceID: "ff2000000000000000000000aabbccdd", Processes: map[string]query.JaegerProcess{
		"p1": {ServiceName: "object"}, "p2": {ServiceName: "audit", Tags: []query.JaegerKeyValue{{Key: "k", Type: "string", Value: "v"}}},
	}}
	big := strings.Repeat("x", 2000)
	const n = 3000
	for i := range n {
		sp := query.JaegerSpan{SpanID: fmt.Sprintf("%016x", i+1), OperationName: "op", StartTime: 1_000_000, Duration: 5,
			ProcessID: []string{"p1", "p2"}[i%2],
			Tags:      []query.JaegerKeyValue{{Key: "diff", Type: "string", Value: big}, {Key: "n", Type: "int64", Value: int64(i)}}}
		if i > 0 {
			sp.References = []query.JaegerReference{{RefType: "CHILD_OF", SpanID: fmt.Sprintf("%016x", 1)}}
		}
		if i == 1 {
			sp.Tags = append(sp.Tags, query.JaegerKeyValue{Key: "error", Type: "bool", Value: true})
			sp.Warnings = []string{"result truncated: span budget of 1 reached"}
			sp.Logs = []query.JaegerLog{{Timestamp: 1_000_001, Fields: []query.JaegerKeyValue{
				{Key: "event", Type: "string", Value: "update"}, {Key: "message", Type: "string", Value: "hi"}}}}
		}
		tr.Spans = append(tr.Spans, sp)
	}
	id := make([]byte, 16)
	id[0] = 0xff
	cs, err := chunks(id, tr)
	require.NoError(t, err)
	require.Greater(t, len(cs), 3, "about 6 MB of spans")
	seen := map[string]bool{}
	for _, c := range cs {
		assert.LessOrEqual(t, proto.Size(c), maxChunkBytes+8<<10, "one message stays near the bound")
		require.NotEmpty(t, c.GetResourceSpans())
		for _, rs := range c.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				require.NotEmpty(t, ss.GetSpans())
				for _, sp := range ss.GetSpans() {
					assert.Equal(t, id, sp.GetTraceId())
					assert.False(t, seen[string(sp.GetSpanId())], "a span once")
					seen[string(sp.GetSpanId())] = true
				}
			}
		}
	}
	assert.Len(t, seen, n)

	var second *tracev1.Span
	var res []string
	for _, rs := range cs[0].GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			res = append(res, kv.GetKey()+"="+kv.GetValue().GetStringValue())
		}
		for _, sp := range rs.GetScopeSpans()[0].GetSpans() {
			if string(sp.GetSpanId()) == "\x00\x00\x00\x00\x00\x00\x00\x02" {
				second = sp
			}
		}
	}
	assert.ElementsMatch(t, []string{"service.name=object", "service.name=audit", "k=v"}, res)
	require.NotNil(t, second)
	assert.Equal(t, tracev1.Status_STATUS_CODE_ERROR, second.GetStatus().GetCode())
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 1}, second.GetParentSpanId())
	assert.Equal(t, uint64(1_000_000_000), second.GetStartTimeUnixNano())
	assert.Equal(t, uint64(1_000_005_000), second.GetEndTimeUnixNano())
	require.Len(t, second.GetEvents(), 1)
	assert.Equal(t, "update", second.GetEvents()[0].GetName())
	keys := map[string]bool{}
	for _, kv := range second.GetAttributes() {
		keys[kv.GetKey()] = true
		if kv.GetKey() == "n" {
			assert.Equal(t, int64(1), kv.GetValue().GetIntValue())
		}
		if kv.GetKey() == warningsAttribute {
			assert.Equal(t, "result truncated: span budget of 1 reached", kv.GetValue().GetArrayValue().GetValues()[0].GetStringValue())
		}
	}
	assert.False(t, keys["error"], "the error flag is the span status")
	assert.True(t, keys[warningsAttribute])

	_, err = chunks(id, query.JaegerTrace{Spans: []query.JaegerSpan{{SpanID: "zz"}}})
	assert.Error(t, err, "a malformed span ID is an error, not a panic")
}
