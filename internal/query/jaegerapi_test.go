package query_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

type envelope struct {
	Data   json.RawMessage     `json:"data"`
	Total  int                 `json:"total"`
	Limit  int                 `json:"limit"`
	Offset int                 `json:"offset"`
	Errors []query.JaegerError `json:"errors"`
}

func call(t *testing.T, u string) (int, envelope) {
	t.Helper()
	code, body := fetch(t, u)
	var env envelope
	require.NoError(t, json.Unmarshal(body, &env), string(body))
	return code, env
}

func expectError(t *testing.T, u string, code int, msg string) {
	t.Helper()
	got, env := call(t, u)
	require.Equal(t, code, got, u)
	require.Len(t, env.Errors, 1, u)
	assert.Equal(t, code, env.Errors[0].Code)
	assert.Contains(t, env.Errors[0].Msg, msg, u)
	assert.Equal(t, "null", string(env.Data))
}

func rangeParams() string {
	return "start=" + strconv.FormatInt(rolloutFrom.UnixMicro(), 10) + "&end=" + strconv.FormatInt(rolloutTo.UnixMicro(), 10)
}

func TestServicesAndOperations(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	code, env := call(t, srv.URL+"/api/services")
	require.Equal(t, http.StatusOK, code)
	var names []string
	require.NoError(t, json.Unmarshal(env.Data, &names))
	require.Len(t, names, 16)
	assert.Equal(t, "tracing", names[0], "the default first")
	assert.Contains(t, names, "tracing [full tree]")
	assert.Contains(t, names, "grouped [ancestors]")
	assert.Contains(t, names, "timeline [descendants]")
	assert.Equal(t, 16, env.Total)

	code, env = call(t, srv.URL+"/api/services/"+url.PathEscape("tracing [full tree]")+"/operations")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `["test"]`, string(env.Data))
	expectError(t, srv.URL+"/api/services/nope/operations", http.StatusBadRequest, "unknown display mode")

	code, env = call(t, srv.URL+"/api/operations?service=tree&spanKind=server")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[{"name":"test","spanKind":"server"}]`, string(env.Data))
	expectError(t, srv.URL+"/api/operations", http.StatusBadRequest, "parameter 'service' is required")
	expectError(t, srv.URL+"/api/operations?service=nope", http.StatusBadRequest, "unknown display mode")
}

func TestSearchParameters(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	base := srv.URL + "/api/traces?" + rangeParams() + "&service=" + url.QueryEscape("tracing")
	count := func(extra string) int {
		t.Helper()
		code, env := call(t, base+extra)
		require.Equal(t, http.StatusOK, code, extra)
		var trs []query.JaegerTrace
		require.NoError(t, json.Unmarshal(env.Data, &trs))
		return len(trs)
	}
	assert.Equal(t, 1, count("&tags="+url.QueryEscape(`{"resource":"deployments","name":"demo"}`)), "JSON tags")
	assert.Equal(t, 1, count("&tags="+url.QueryEscape(`resource=deployments name="demo"`)), "logfmt tags")
	assert.Equal(t, 1, count("&tag=resource:deployments&tag=name:demo"), "the older tag=k:v form")
	assert.Equal(t, 1, count("&tags="+url.QueryEscape(`{"resource":"deployments"}`)+"&tags="+url.QueryEscape(`{"name":"demo"}`)), "repeated tags merge")
	assert.Equal(t, 1, count("&operation=test&tag=resource:deployments"), "operation is the cluster")
	assert.Equal(t, 0, count("&operation=other&tag=resource:deployments"))
	assert.Equal(t, 1, count("&operation=all&tag=resource:deployments"))
	assert.Equal(t, 1, count("&tags="+url.QueryEscape(`{"user":"admin","verb":"delete","resource":"deployments"}`)), "aliases")
	assert.Equal(t, 1, count("&tags="+url.QueryEscape(`{"user.name":"admin","kelemetry.audit.verb":"delete","kelemetry.object.resource":"deployments"}`)), "attribute names")
	assert.Equal(t, 0, count("&tags="+url.QueryEscape(`{"user":"nobody"}`)))
	assert.Equal(t, 8, count("&tag=resource:pods&limit=8"), "the limit counts objects")
	assert.Equal(t, 3, count("&tag=resource:nodes&limit=0"), "0 means the default")
	assert.Equal(t, 3, count("&tag=resource:nodes&minDuration&maxDuration"), "empty durations as Jaeger UI sends them")
	assert.Equal(t, 0, count("&tag=resource:deployments&minDuration=1h"), "min duration applies to the root")
	assert.Equal(t, 1, count("&tag=resource:deployments&lookback=2h"), "lookback is ignored with start")

	// Events clip: the whole fixture is after 17:09.
	early := "start=" + strconv.FormatInt(rolloutFrom.UnixMicro(), 10) + "&end=" + strconv.FormatInt(time.Date(2026, 11, 29, 17, 9, 0, 0, time.UTC).UnixMicro(), 10)
	code, env := call(t, srv.URL+"/api/traces?service=tracing&tag=resource:deployments&tag=user:admin&"+early)
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[]`, string(env.Data), "an empty search is an empty list")
	assert.Nil(t, env.Errors)

	for extra, msg := range map[string]string{
		"&tags=" + url.QueryEscape(`{"a":1}`): "malformed 'tags' parameter, cannot unmarshal JSON",
		"&tags=" + url.QueryEscape(`{bad`):    "malformed 'tags' parameter",
		"&tags=" + url.QueryEscape(`a="open`): "unterminated quote",
		"&tag=nocolon":                        "malformed 'tag' parameter",
		"&limit=x":                            "malformed 'limit' parameter",
		"&limit=-1":                           "malformed 'limit' parameter",
		"&minDuration=abc":                    "malformed 'minDuration' parameter",
		"&minDuration=2s&maxDuration=1s":      "'maxDuration' must be greater",
		"&service=nope":                       "unknown display mode",
		"&start=yesterday":                    "malformed 'start' parameter",
		"&end=tomorrow":                       "malformed 'end' parameter",
		"&start=100&end=1":                    "'end' is before 'start'",
	} {
		u := srv.URL + "/api/traces?" + rangeParams() + "&service=tracing" + extra
		if strings.HasPrefix(extra, "&service=") || strings.HasPrefix(extra, "&start=") || strings.HasPrefix(extra, "&end=") {
			u = srv.URL + "/api/traces?" + strings.TrimPrefix(extra, "&")
			if !strings.HasPrefix(extra, "&service=") {
				u += "&service=tracing"
			}
		}
		expectError(t, u, http.StatusBadRequest, msg)
	}
	expectError(t, srv.URL+"/api/traces?service=tracing&lookback=soon", http.StatusBadRequest, "malformed 'lookback' parameter")
}

func TestParseSearchDefaults(t *testing.T) {
	now := time.Date(2026, 11, 29, 18, 0, 0, 500, time.UTC)
	req, err := query.ParseSearch(url.Values{}, now)
	require.NoError(t, err)
	assert.Equal(t, query.DefaultMode, req.Mode)
	assert.Equal(t, now.Add(-48*time.Hour).Truncate(time.Second), req.Query.From, "48h before now, widened to a second")
	assert.Equal(t, now.Truncate(time.Second).Add(time.Second), req.Query.To)
	assert.Equal(t, query.DefaultAPILimit, req.Query.Limit)

	req, err = query.ParseSearch(url.Values{"lookback": {"2d"}, "service": {"* grouped [descendants]"}, "limit": {"5000"}}, now)
	require.NoError(t, err)
	assert.Equal(t, query.Mode{Display: query.DisplayGrouped, Link: query.LinkDescendants}, req.Mode)
	assert.Equal(t, now.Add(-48*time.Hour).Truncate(time.Second), req.Query.From)
	assert.Equal(t, query.MaxAPILimit, req.Query.Limit)

	req, err = query.ParseSearch(url.Values{"lookback": {"1h"}, "tags": {`auditID=abc cluster=c1 k8s.namespace.name=ns error`}}, now)
	require.NoError(t, err)
	assert.Equal(t, now.Add(-time.Hour).Truncate(time.Second), req.Query.From)
	assert.Equal(t, "c1", req.Query.Cluster)
	assert.Equal(t, "ns", req.Query.Namespace)
	assert.Equal(t, aggregator.Attrs{{Key: aggregator.AttrAuditID, Value: "abc"}, {Key: "error", Value: "true"}}, req.Query.Attributes)
}

func TestGetTrace(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	trs := traces(t, searchURL(srv.URL, "tracing", map[string]string{"resource": "deployments", "name": "demo"}))
	require.Len(t, trs, 1)
	id := trs[0].TraceID

	code, env := call(t, srv.URL+"/api/traces/"+id)
	require.Equal(t, http.StatusOK, code)
	var got []query.JaegerTrace
	require.NoError(t, json.Unmarshal(env.Data, &got))
	require.Len(t, got, 1)
	a, _ := json.Marshal(got[0])
	b, _ := json.Marshal(trs[0])
	assert.JSONEq(t, string(b), string(a))

	// Lookup by ID through the search endpoint: found ones in data, missing ones as errors.
	missing := id[:18] + "00000000000000"
	code, env = call(t, srv.URL+"/api/traces?traceID="+id+"&traceID="+missing)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(env.Data, &got))
	assert.Len(t, got, 1)
	require.Len(t, env.Errors, 1)
	assert.Equal(t, missing, env.Errors[0].TraceID)

	expectError(t, srv.URL+"/api/traces/"+missing, http.StatusNotFound, "trace not found")
	expectError(t, srv.URL+"/api/traces/zzz", http.StatusBadRequest, "hex")
	expectError(t, srv.URL+"/api/traces/"+strings.Repeat("1", 33), http.StatusBadRequest, "32 hex")
	expectError(t, srv.URL+"/api/traces/"+id[:2]+"9"+id[3:], http.StatusBadRequest, "unknown display mode digit")
	expectError(t, srv.URL+"/api/traces/"+id[:3]+"3"+id[4:], http.StatusBadRequest, "unknown link mode digit")
	expectError(t, srv.URL+"/api/traces?traceID=xyz", http.StatusBadRequest, "hex")
	expectError(t, srv.URL+"/api/traces/0123456789abcdef", http.StatusNotFound, "trace not found")

	// A stored trace ID shows its object's window in the default mode.
	var objs query.ObjectsResponse
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?resource=deployments&name=demo", &objs))
	require.Len(t, objs.Objects, 1)
	stored := objs.Objects[0].Windows[0].TraceID
	code, env = call(t, srv.URL+"/api/traces/"+stored)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal(env.Data, &got))
	require.Len(t, got, 1)
	assert.Equal(t, stored, got[0].TraceID)
	assert.Equal(t, "deployments", tagOf(rootOf(t, got[0]), "resource"))
}

func TestRedirect(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	at := "2026-11-29T17:09:45Z"
	resp, err := client.Get(srv.URL + "/redirect?cluster=test&group=apps&resource=deployments&namespace=default&name=demo&time=" + at)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/trace/ff20"), loc)
	id := strings.TrimPrefix(loc, "/trace/")
	tr := traces(t, srv.URL+"/api/traces/"+id)
	require.Len(t, tr, 1)
	assert.Equal(t, "demo", tagOf(rootOf(t, tr[0]), "name"))

	// ts and Unix microseconds work too, and the mode can be chosen.
	resp, err = client.Get(srv.URL + "/redirect?cluster=test&resource=deployments&name=demo&mode=" + url.QueryEscape("tracing [full tree]") +
		"&ts=" + strconv.FormatInt(time.Date(2026, 11, 29, 17, 9, 45, 0, time.UTC).UnixMicro(), 10))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/trace/ff21"))

	expectError(t, srv.URL+"/redirect?cluster=test&resource=deployments&name=nope&time="+at, http.StatusNotFound, "no object")
	expectError(t, srv.URL+"/redirect?cluster=test&resource=deployments&name=demo&time=2026-11-28T10:00:00Z", http.StatusNotFound, "no object")
	expectError(t, srv.URL+"/redirect?cluster=test&group=core&resource=deployments&name=demo&time="+at, http.StatusNotFound, "no object")
	expectError(t, srv.URL+"/redirect?cluster=test&resource=deployments&time="+at, http.StatusBadRequest, "required")
	expectError(t, srv.URL+"/redirect?resource=deployments&name=demo&time=noon", http.StatusBadRequest, "bad time")
	expectError(t, srv.URL+"/redirect?resource=deployments&name=demo&mode=nope", http.StatusBadRequest, "unknown display mode")
}

func TestDisplayIDLayout(t *testing.T) {
	from := time.Date(2026, 11, 29, 16, 30, 0, 0, time.UTC)
	to := time.Date(2026, 11, 29, 18, 0, 0, 1, time.UTC)
	key := aggregator.ObjectKey{Resource: "pods", Name: "p"}
	anchor := aggregator.TraceIDFor(key, from)
	mode := query.Mode{Display: query.DisplayGrouped, Link: query.LinkAncestors}
	id := query.NewDisplayID(mode, from, to, key, anchor)
	s := id.String()
	assert.Equal(t, "ff32", s[:4])
	assert.Equal(t, strconv.FormatInt(from.Unix(), 16), s[4:12])
	assert.Equal(t, "001519", s[12:18], "90 minutes and one second: the end widens to a second")
	assert.Equal(t, anchor.String()[:14], s[18:], "the object's hash, which starts each of its trace IDs")
	assert.False(t, id.Legacy)
	back, err := query.ParseDisplayID(id.TraceID())
	require.NoError(t, err)
	assert.Equal(t, id, back)
	assert.Equal(t, to.Truncate(time.Second).Add(time.Second), back.End)

	// An anchor stored by an earlier release (its trace ID hashed the window too) keeps the
	// earlier layout, which names the trace by its first bytes.
	old := trace.TraceID{0x12, 0x34, 0x56, 0x78, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}
	legacy := query.NewDisplayID(mode, from, to, key, old)
	s = legacy.String()
	assert.Equal(t, "ff32000000", s[:10])
	assert.Equal(t, strconv.FormatInt(from.Unix(), 16), s[10:18])
	assert.Equal(t, "001519", s[18:24])
	assert.Equal(t, "12345678", s[24:])
	back, err = query.ParseDisplayID(legacy.TraceID())
	require.NoError(t, err)
	assert.True(t, back.Legacy)
	assert.Equal(t, legacy, back)

	for _, m := range query.Modes() {
		p, err := query.ParseMode(m.Name())
		require.NoError(t, err)
		assert.Equal(t, m, p)
	}
}

// Traces stored by an earlier release have trace IDs that do not name their object: their search
// results keep the earlier display ID layout, which still resolves by the anchor's ID prefix.
func TestLegacyDisplayIDResolves(t *testing.T) {
	st := memory.New(memory.Config{}, 0)
	w := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	obj := aggregator.ObjectRef{Cluster: "c", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "old"}
	tid := trace.TraceID{0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} // not TraceIDFor's scheme
	root := aggregator.ObjectSpanID(tid)
	require.NoError(t, st.Export(t.Context(), []*aggregator.Span{
		{TraceID: tid, SpanID: root, Kind: aggregator.KindObject, Source: "object", Name: "deployments/old", Object: obj, Window: w, Start: w, End: w.Add(30 * time.Minute)},
		{TraceID: tid, SpanID: aggregator.EventSpanID(tid, "audit", "1"), ParentID: root, Kind: aggregator.KindEvent, Source: "audit", Name: "admin create",
			Object: obj, Window: w, Start: w.Add(time.Minute), End: w.Add(time.Minute + time.Second)},
	}))
	_, srv := newAPI(t, st)
	q := url.Values{"service": {"tracing"}, "tags": {`{"resource":"deployments","name":"old"}`},
		"start": {strconv.FormatInt(w.UnixMicro(), 10)}, "end": {strconv.FormatInt(w.Add(time.Hour).UnixMicro(), 10)}}
	code, env := call(t, srv.URL+"/api/traces?"+q.Encode())
	require.Equal(t, http.StatusOK, code)
	var found []query.JaegerTrace
	require.NoError(t, json.Unmarshal(env.Data, &found))
	require.Len(t, found, 1)
	id := found[0].TraceID
	assert.Equal(t, "ff20000000", id[:10], "the earlier layout")
	assert.Equal(t, tid.String()[:8], id[24:], "names the stored trace by its first bytes")

	code, env = call(t, srv.URL+"/api/traces/"+id)
	require.Equal(t, http.StatusOK, code)
	var got []query.JaegerTrace
	require.NoError(t, json.Unmarshal(env.Data, &got))
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].TraceID)
	assert.Len(t, got[0].Spans, len(found[0].Spans))
}

// GET /api/dependencies answers Jaeger Query's dependency graph: resource -> resource edges with
// the number of linked object pairs, for Jaeger UI's and Grafana's dependency views.
func TestDependencies(t *testing.T) {
	_, srv := newAPI(t, rollout(t))
	u := srv.URL + "/api/dependencies?endTs=" + strconv.FormatInt(rolloutTo.UnixMilli(), 10) +
		"&lookback=" + strconv.FormatInt(rolloutTo.Sub(rolloutFrom).Milliseconds()+1, 10)
	code, env := call(t, u)
	require.Equal(t, http.StatusOK, code)
	var deps []struct {
		Parent    string `json:"parent"`
		Child     string `json:"child"`
		CallCount uint64 `json:"callCount"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &deps))
	edges := map[string]uint64{}
	for _, d := range deps {
		edges[d.Parent+" -> "+d.Child] = d.CallCount
	}
	assert.GreaterOrEqual(t, edges["deployments -> replicasets"], uint64(2), "%v", edges)
	assert.GreaterOrEqual(t, edges["replicasets -> pods"], uint64(1), "%v", edges)
	assert.NotContains(t, edges, "pods -> replicasets")
	assert.Equal(t, len(deps), env.Total)

	// Long before the recording: no edges. The default range is the 24 hours before now.
	code, env = call(t, srv.URL+"/api/dependencies?endTs="+strconv.FormatInt(rolloutFrom.Add(-48*time.Hour).UnixMilli(), 10))
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `[]`, string(env.Data))
	expectError(t, srv.URL+"/api/dependencies?endTs=soon", http.StatusBadRequest, "endTs")
	expectError(t, srv.URL+"/api/dependencies?lookback=-5", http.StatusBadRequest, "lookback")
}
