package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/telemetry"
)

func newUIAPI(t testing.TB, r store.Reader, cfg query.Config) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	quiet := telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}
	e := query.NewEngine(r, 0, cfg)
	query.NewJaegerAPI(e, quiet).Register(mux)
	query.NewUIAPI(e, quiet).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func summaries(t *testing.T, u string) []query.SearchSummary {
	t.Helper()
	code, env := call(t, u)
	require.Equal(t, http.StatusOK, code, u)
	var out []query.SearchSummary
	require.NoError(t, json.Unmarshal(env.Data, &out))
	return out
}

func TestUISearchSummaries(t *testing.T) {
	st := rollout(t)
	srv := newUIAPI(t, st, query.Config{})
	tags := map[string]string{"resource": "deployments", "name": "demo"}
	u := searchURL(srv.URL, "tracing [full tree]", tags)
	uiURL := srv.URL + "/api/ui/search?" + u[len(srv.URL+"/api/traces?"):]

	got := summaries(t, uiURL)
	require.Len(t, got, 1)
	s := got[0]
	full := traces(t, u)
	require.Len(t, full, 1)
	assert.Equal(t, full[0].TraceID, s.TraceID, "the summary links the trace the Jaeger API draws")

	// Count what the drawn trace holds: object spans and folded events.
	var objects, events int
	for _, sp := range full[0].Spans {
		if tagOf(sp, "kelemetry.span.kind") == "object" {
			objects++
			events += len(sp.Logs)
		}
	}
	assert.Equal(t, objects, s.Objects)
	assert.Equal(t, events, s.Events)
	assert.Equal(t, 11, s.Objects, "the Deployment, 2 ReplicaSets, 8 Pods")
	assert.Equal(t, query.SummaryObject{Cluster: "test", Group: "apps", Resource: "deployments", Namespace: "default", Name: "demo"}, s.Root)
	assert.Equal(t, s.Root, s.Seed)
	assert.Equal(t, 1, s.Roots)
	assert.Equal(t, []string{"test"}, s.Clusters)
	assert.Zero(t, s.Omitted)
	root := rootOf(t, full[0])
	assert.Equal(t, root.StartTime, s.Start.UnixMicro(), "tracing compacts the root to its events")
	assert.GreaterOrEqual(t, s.End.UnixMicro(), root.StartTime+root.Duration, "the last event's end")
	assert.Less(t, s.End.Sub(s.Start), time.Minute)

	// The limit counts objects; no match is an empty list, not an error.
	tags["name"] = "nothing"
	u = searchURL(srv.URL, "tracing", tags)
	assert.Empty(t, summaries(t, srv.URL+"/api/ui/search?"+u[len(srv.URL+"/api/traces?"):]))

	// Errors are explained.
	expectError(t, srv.URL+"/api/ui/search?start=20&end=10", http.StatusBadRequest, "'end' is before 'start'")
	expectError(t, srv.URL+"/api/ui/search?service=nope", http.StatusBadRequest, "unknown display mode")
	bad := newUIAPI(t, failing{st}, query.Config{})
	expectError(t, bad.URL+"/api/ui/search", http.StatusInternalServerError, "disk on fire")
	expectError(t, bad.URL+"/api/ui/suggestions", http.StatusInternalServerError, "disk on fire")
}

// failing is a store whose object index fails.
type failing struct{ store.Reader }

var errDisk = errors.New("disk on fire")

func (failing) FindObjects(context.Context, store.ObjectQuery) ([]store.ObjectWindows, error) {
	return nil, errDisk
}

func TestUISearchOmitted(t *testing.T) {
	dep := obj("deployments", "d")
	var w world
	w.event(dep, w0.Add(time.Minute), "d")
	for _, rs := range []string{"r1", "r2", "r3"} {
		w.link(dep, obj("replicasets", rs), w0, "children")
	}
	srv := newUIAPI(t, w.store(t, 1), query.Config{PerLevel: 2})
	q := url.Values{"service": {"tracing [descendants]"}, "tags": {`{"resource":"deployments","name":"d"}`},
		"start": {strconv.FormatInt(w0.UnixMicro(), 10)}, "end": {strconv.FormatInt(w0.Add(win).UnixMicro(), 10)}}
	got := summaries(t, srv.URL+"/api/ui/search?"+q.Encode())
	require.Len(t, got, 1)
	assert.Equal(t, 3, got[0].Objects)
	assert.Equal(t, 1, got[0].Omitted, "r3 is cut by the level budget")
	assert.Equal(t, 1, got[0].Events)
	assert.Equal(t, w0.Add(time.Minute), got[0].Start, "the span of the events")
}

func TestUISuggestions(t *testing.T) {
	srv := newUIAPI(t, rollout(t), query.Config{})
	get := func(params string) query.Suggestions {
		t.Helper()
		code, env := call(t, srv.URL+"/api/ui/suggestions"+params)
		require.Equal(t, http.StatusOK, code)
		var s query.Suggestions
		require.NoError(t, json.Unmarshal(env.Data, &s))
		return s
	}
	s := get("")
	assert.Equal(t, []string{"test"}, s.Clusters)
	assert.Subset(t, s.Resources, []query.SuggestedResource{
		{Group: "apps", Resource: "deployments"}, {Group: "", Resource: "pods"}, {Group: "apps", Resource: "replicasets"},
	})
	assert.IsNonDecreasing(t, resourceNames(s.Resources), "sorted by resource")
	assert.Contains(t, s.Namespaces, "default")
	assert.IsIncreasing(t, s.Namespaces, "sorted, no duplicates")
	assert.Equal(t, time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), s.Oldest, "whole store without a range")
	assert.Equal(t, time.Date(2026, 11, 29, 17, 30, 0, 0, time.UTC), s.Newest, "the end of the newest window")
	assert.False(t, s.Truncated)

	// A range without data keeps the clusters but suggests no resources.
	far := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s = get("?start=" + strconv.FormatInt(far.UnixMicro(), 10) + "&end=" + strconv.FormatInt(far.Add(time.Hour).UnixMicro(), 10))
	assert.Equal(t, []string{"test"}, s.Clusters)
	assert.Empty(t, s.Resources)
	assert.True(t, s.Oldest.IsZero())

	s = get("?cluster=other")
	assert.Empty(t, s.Resources, "the cluster filter applies")
}

func resourceNames(rs []query.SuggestedResource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Resource
	}
	return out
}
