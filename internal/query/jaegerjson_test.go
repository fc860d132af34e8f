package query_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
)

// The hand-written span encoder writes what encoding/json writes, for every span the modes draw
// from the recorded rollout and for the strings and values encoding/json escapes or formats.
func TestSpanJSONMatchesEncodingJSON(t *testing.T) {
	api, _ := newAPI(t, rollout(t))
	n := 0
	for _, service := range []string{"tracing [full tree]", "grouped [full tree]", "tree [descendants]", "timeline [full tree]", "tracing"} {
		req, err := query.ParseSearch(url.Values{"service": {service}, "tags": {`{"resource":"deployments","name":"demo"}`},
			"start": {"0"}, "end": {"4102444800000000"}}, time.Now())
		require.NoError(t, err)
		traces, err := api.Search(context.Background(), req)
		require.NoError(t, err)
		for _, tr := range traces {
			for i := range tr.Spans {
				want, err := json.Marshal(&tr.Spans[i])
				require.NoError(t, err)
				require.Equal(t, string(want), string(query.AppendSpanJSON(nil, &tr.Spans[i])))
				n++
			}
		}
	}
	assert.Greater(t, n, 100, "spans compared")

	odd := []string{"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\r", "\b\f\x00\x1f\x7f",
		"héllo wörld", "日本", "line\u2028sep\u2029", "bad \xff utf8", "emoji 🙂"}
	for _, s := range odd {
		sp := query.JaegerSpan{TraceID: s, SpanID: s, OperationName: s, ProcessID: s, Warnings: []string{s},
			References: []query.JaegerReference{{RefType: s, TraceID: s, SpanID: s}},
			Tags:       []query.JaegerKeyValue{{Key: s, Type: "string", Value: s}},
			Logs:       []query.JaegerLog{{Timestamp: -5, Fields: []query.JaegerKeyValue{{Key: s, Type: "string", Value: s}}}}}
		want, err := json.Marshal(&sp)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(query.AppendSpanJSON(nil, &sp)), "%q", s)
	}
	values := []any{nil, true, false, int64(-42), 7, 3.5, 1e21, float32(0.1), uint8(9), []string{"a"}, map[string]int{"b": 1}}
	for _, v := range values {
		sp := query.JaegerSpan{Tags: []query.JaegerKeyValue{{Key: "k", Type: "x", Value: v}}, Logs: []query.JaegerLog{{Fields: nil}}}
		want, err := json.Marshal(&sp)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(query.AppendSpanJSON(nil, &sp)), "%#v", v)
	}
	var empty query.JaegerSpan // nil slices are null
	want, _ := json.Marshal(&empty)
	assert.Equal(t, string(want), string(query.AppendSpanJSON(nil, &empty)))
}
