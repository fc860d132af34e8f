package query

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
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
