package query_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
)

// full32 writes a Jaeger trace ID as 32 hex digits.
func full32(id string) string { return strings.Repeat("0", 32-len(id)) + id }

// spanObjects lists the objects (resource/name) of a trace's spans.
func spanObjects(tr query.JaegerTrace) map[string]bool {
	out := map[string]bool{}
	for _, s := range tr.Spans {
		var res, name string
		for _, kv := range s.Tags {
			switch kv.Key {
			case "resource":
				res, _ = kv.Value.(string)
			case "name":
				name, _ = kv.Value.(string)
			}
		}
		if res != "" {
			out[res+"/"+name] = true
		}
	}
	return out
}

// TestMergeUnrelated merges a Node and a Pod (no linker relates them; two search results) into
// one trace on one time axis, through the Jaeger API's trace ID, its lookup and the merge
// endpoint.
func TestMergeUnrelated(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	node := traces(t, searchURL(srv.URL, "tracing", map[string]string{"resource": "nodes", "name": "kwok-node-1"}))
	pod := traces(t, searchURL(srv.URL, "tracing", map[string]string{"resource": "pods", "name": "demo-7fb4c846ff-b7qjt"}))
	require.Len(t, node, 1)
	require.Len(t, pod, 1)
	mergeID := full32(node[0].TraceID) + full32(pod[0].TraceID)

	code, body := fetch(t, srv.URL+"/api/traces/"+mergeID)
	require.Equal(t, http.StatusOK, code, string(body))
	var resp struct {
		Data []query.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &resp))
	require.Len(t, resp.Data, 1)
	m := resp.Data[0]
	assert.Equal(t, mergeID, m.TraceID)
	assert.Len(t, m.Spans, 1+len(node[0].Spans)+len(pod[0].Spans), "a root over every span of both")

	// One trace: every span carries the merge ID, IDs are unique, references resolve, and
	// there is one root, with each member's root under it.
	ids := map[string]bool{}
	var roots []query.JaegerSpan
	for _, s := range m.Spans {
		assert.Equal(t, mergeID, s.TraceID)
		assert.False(t, ids[s.SpanID], "span ID %s twice", s.SpanID)
		ids[s.SpanID] = true
		if len(s.References) == 0 {
			roots = append(roots, s)
		}
		_, ok := m.Processes[s.ProcessID]
		assert.True(t, ok, "process %s", s.ProcessID)
	}
	require.Len(t, roots, 1)
	root := roots[0]
	assert.Equal(t, "merged: 2 traces", root.OperationName)
	assert.Contains(t, root.Tags, query.JaegerKeyValue{Key: "kelemetry.span.kind", Type: "string", Value: "merge"})
	members := map[string]bool{}
	for _, s := range m.Spans {
		for _, r := range s.References {
			assert.True(t, ids[r.SpanID], "reference to %s", r.SpanID)
			assert.Equal(t, mergeID, r.TraceID)
			if r.SpanID == root.SpanID {
				for _, kv := range s.Tags {
					if kv.Key == "kelemetry.merge.member" {
						members[kv.Value.(string)] = true
					}
				}
			}
		}
	}
	assert.Equal(t, map[string]bool{node[0].TraceID: true, pod[0].TraceID: true}, members)
	objs := spanObjects(m)
	assert.True(t, objs["nodes/kwok-node-1"], "%v", objs)
	assert.True(t, objs["pods/demo-7fb4c846ff-b7qjt"], "%v", objs)

	// One time axis: the root spans both members.
	first, last := root.StartTime, root.StartTime+root.Duration
	for _, tr := range []query.JaegerTrace{node[0], pod[0]} {
		for _, s := range tr.Spans {
			assert.GreaterOrEqual(t, s.StartTime, first)
			assert.LessOrEqual(t, s.StartTime+s.Duration, last)
		}
	}

	// The same through the merge endpoint and the lookup.
	code, viaMerge := fetch(t, srv.URL+"/api/traces/merge?id="+node[0].TraceID+"&id="+pod[0].TraceID)
	require.Equal(t, http.StatusOK, code, string(viaMerge))
	assert.JSONEq(t, string(body), string(viaMerge))
	looked := traces(t, srv.URL+"/api/traces?traceID="+mergeID)
	require.Len(t, looked, 1)
	assert.Equal(t, mergeID, looked[0].TraceID)
	assert.Len(t, looked[0].Spans, len(m.Spans))
}

// TestMergeSameObjectTwice merges two views of one object (tracing and tree): the spans they
// share get distinct IDs.
func TestMergeSameObjectTwice(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	dep := map[string]string{"resource": "deployments", "name": "demo"}
	a := traces(t, searchURL(srv.URL, "tracing", dep))
	b := traces(t, searchURL(srv.URL, "tree", dep))
	require.Len(t, a, 1)
	require.Len(t, b, 1)
	got := traces(t, srv.URL+"/api/traces/"+full32(a[0].TraceID)+full32(b[0].TraceID))
	require.Len(t, got, 1)
	ids := map[string]bool{}
	for _, s := range got[0].Spans {
		require.False(t, ids[s.SpanID], "span ID %s twice", s.SpanID)
		ids[s.SpanID] = true
	}
	assert.Len(t, got[0].Spans, 1+len(a[0].Spans)+len(b[0].Spans))
}

// TestMergeErrors: bounds on members, malformed IDs, duplicates and unknown members.
func TestMergeErrors(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	pod := traces(t, searchURL(srv.URL, "tracing", map[string]string{"resource": "pods", "name": "demo-7fb4c846ff-b7qjt"}))
	require.Len(t, pod, 1)
	p := full32(pod[0].TraceID)
	unknown := strings.Repeat("0", 31) + "1"
	cases := []struct {
		name, path string
		code       int
		msg        string
	}{
		{"21 members", "/api/traces/" + strings.Repeat(p, 21), http.StatusBadRequest, "at most 20"},
		{"not whole members", "/api/traces/" + p + "abc", http.StatusBadRequest, "multiple of 32"},
		{"not hex", "/api/traces/" + p + strings.Repeat("z", 32), http.StatusBadRequest, "hex"},
		{"duplicate", "/api/traces/" + p + p, http.StatusBadRequest, "twice"},
		{"one member", "/api/traces/merge?id=" + p, http.StatusBadRequest, "at least 2"},
		{"no member", "/api/traces/merge", http.StatusBadRequest, "at least 2"},
		{"21 by parameter", "/api/traces/merge?id=" + strings.TrimSuffix(strings.Repeat(p+",", 21), ","), http.StatusBadRequest, "at most 20"},
		{"unknown member", "/api/traces/" + p + unknown, http.StatusNotFound, unknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := fetch(t, srv.URL+c.path)
			assert.Equal(t, c.code, code, string(body))
			var resp struct {
				Errors []struct{ Msg string } `json:"errors"`
			}
			require.NoError(t, json.Unmarshal(body, &resp), string(body))
			require.NotEmpty(t, resp.Errors, string(body))
			assert.Contains(t, resp.Errors[0].Msg, c.msg)
		})
	}
	// 20 distinct members are within the bound: the answer is about the members (all unknown
	// but one, so a 404), not a 400 about their count.
	var twenty strings.Builder
	twenty.WriteString(p)
	for i := 1; i < 20; i++ {
		twenty.WriteString(strings.Repeat("0", 30) + string("0123456789abcdef"[i/16]) + string("0123456789abcdef"[i%16]))
	}
	code, body := fetch(t, srv.URL+"/api/traces/"+twenty.String())
	assert.Equal(t, http.StatusNotFound, code, string(body))
}
