package query

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTraces writes what writeJSON would, piece by piece.
func TestWriteTracesMatchesWriteJSON(t *testing.T) {
	trs := []JaegerTrace{
		{TraceID: "ab", Spans: []JaegerSpan{{TraceID: "ab", SpanID: "01", OperationName: "<x> & \"y\"", References: []JaegerReference{},
			Tags: []JaegerKeyValue{str("k", "v\u2028")}, Logs: []JaegerLog{}, Warnings: []string{"w"}}, {SpanID: "02"}},
			Processes: map[string]JaegerProcess{"p2": {ServiceName: "b"}, "p1": {ServiceName: "a"}}, Warnings: []string{"result truncated: x"}},
		{TraceID: "cd", Processes: map[string]JaegerProcess{}},
	}
	for _, tc := range []struct {
		resp jaegerResponse
		trs  []JaegerTrace
	}{
		{jaegerResponse{Total: 2, Errors: []JaegerError{{Msg: "m"}}, Truncated: "t"}, trs},
		{jaegerResponse{}, []JaegerTrace{}},
		{jaegerResponse{}, nil},
	} {
		want := httptest.NewRecorder()
		r := tc.resp
		if tc.trs != nil {
			r.Data = tc.trs
		}
		writeJSON(want, 200, r)
		got := httptest.NewRecorder()
		writeTraces(got, 200, tc.resp, tc.trs)
		assert.Equal(t, want.Body.String(), got.Body.String())
		assert.True(t, json.Valid(got.Body.Bytes()))
	}
}

// A large trace's spans are measured and written in parallel chunks: the answer is byte for
// byte what encoding/json writes, and the budget takes the spans that fit, in order, as if it
// measured them one by one.
func TestSpansMeasuredAndWrittenInParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	tr := JaegerTrace{TraceID: "ab", Processes: map[string]JaegerProcess{"p1": {ServiceName: "a", Tags: []JaegerKeyValue{}}}, Warnings: []string{}}
	for i := range 5000 {
		name := fmt.Sprintf("span <%d> \u2028 %s", i, strings.Repeat("x", i%300))
		tr.Spans = append(tr.Spans, JaegerSpan{TraceID: "ab", SpanID: fmt.Sprintf("%04d", i), OperationName: name,
			References: []JaegerReference{}, Tags: []JaegerKeyValue{str("k", name)}, Logs: []JaegerLog{}, ProcessID: "p1"})
	}
	want := httptest.NewRecorder()
	writeJSON(want, 200, jaegerResponse{Data: []JaegerTrace{tr}})
	got := httptest.NewRecorder()
	writeTraces(got, 200, jaegerResponse{}, []JaegerTrace{tr})
	assert.Equal(t, want.Body.String(), got.Body.String())

	const limit = 1 << 20
	fit, used := 0, int64(0)
	for i := range tr.Spans {
		n := int64(len(appendSpanJSON(nil, &tr.Spans[i]))) + 1
		if i > 0 && used+n > limit {
			break
		}
		used += n
		fit++
	}
	require.Less(t, fit, len(tr.Spans), "the budget runs out")
	b := newRenderBudget(context.Background(), limit)
	assert.Equal(t, fit, b.takeSpans(tr.Spans, true))
	assert.Equal(t, used, b.used)
	assert.True(t, b.exhausted)
	assert.Zero(t, b.takeSpans(tr.Spans[fit:], false), "nothing more once it ran out")
}
