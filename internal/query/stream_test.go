package query

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
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

// The spans the render budget measured are written from the JSON it kept, and a span changed
// after (the root's truncation warning, the marker span added) is encoded again: the answer is
// what encoding/json writes for the spans as they are.
func TestWriteTracesWritesMeasuredSpans(t *testing.T) {
	b := newRenderBudget(context.Background(), 1<<20)
	tr := JaegerTrace{TraceID: "ab", Processes: map[string]JaegerProcess{"p1": {ServiceName: "a", Tags: []JaegerKeyValue{}}}, Warnings: []string{}}
	for i, name := range []string{"root", "child <1>", "child \u2028 2"} {
		tr.Spans = append(tr.Spans, JaegerSpan{TraceID: "ab", SpanID: fmt.Sprintf("%02d", i), OperationName: name,
			References: []JaegerReference{}, Tags: []JaegerKeyValue{str("k", name)}, Logs: []JaegerLog{}, ProcessID: "p1"})
	}
	require.Equal(t, len(tr.Spans), b.takeSpans(tr.Spans, true))
	for i := range tr.Spans {
		require.Equal(t, string(appendSpanJSON(nil, &tr.Spans[i])), string(tr.Spans[i].enc), "the JSON measured is kept")
	}
	markTruncated(&tr, "result truncated: x", true)
	assert.Nil(t, tr.Spans[0].enc, "the root changed: its kept JSON is dropped")
	assert.NotNil(t, tr.Spans[1].enc)

	want := httptest.NewRecorder()
	writeJSON(want, 200, jaegerResponse{Data: []JaegerTrace{tr}})
	got := httptest.NewRecorder()
	writeTraces(got, 200, jaegerResponse{}, []JaegerTrace{tr})
	assert.Equal(t, want.Body.String(), got.Body.String())
	assert.Contains(t, got.Body.String(), `"warnings":["result truncated: x"]`)
}
