package query_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

var (
	dep = aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "web"}
	rs  = aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "ns", Name: "web-1"}
	t0  = time.Date(2026, 11, 29, 17, 5, 0, 0, time.UTC)
)

// seeded runs two events through a real aggregator (with a linker) into a memory store.
func seeded(t *testing.T) (*memory.Store, *httptest.Server) {
	t.Helper()
	st := memory.New(memory.Config{}, 0)
	linker := &aggregatortest.StaticLinker{Links: map[aggregator.ObjectKey][]aggregator.Link{
		rs.Key(): {{Target: dep, Role: aggregator.RoleParent, Class: "children"}},
	}}
	e, err := aggregator.New(aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{st}, Linkers: []aggregator.Linker{linker}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	for i, obj := range []aggregator.ObjectRef{dep, rs} {
		require.NoError(t, e.Send(ctx, &aggregator.Event{
			Object: aggregator.Object{ObjectRef: obj}, Source: "audit", ID: obj.Name, Title: "alice update",
			Start: t0.Add(time.Duration(i) * time.Second), End: t0.Add(time.Duration(i)*time.Second + 5*time.Millisecond),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrUser, Value: "alice"}},
			Logs:       []aggregator.Log{{Time: t0, Type: aggregator.LogTypeError, Message: "Conflict: try again"}},
			Error:      true,
		}))
	}
	require.NoError(t, e.Stop(ctx))
	mux := http.NewServeMux()
	query.NewNativeAPI(st, telemetry.Settings{}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return st, srv
}

func get(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

func TestObjects(t *testing.T) {
	_, srv := seeded(t)
	var resp query.ObjectsResponse
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?resource=deployments", &resp))
	require.Len(t, resp.Objects, 1)
	o := resp.Objects[0]
	assert.Equal(t, dep, o.ObjectRef)
	require.Len(t, o.Windows, 1)
	assert.Equal(t, time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), o.Windows[0].Start)
	assert.Equal(t, aggregator.TraceIDFor(dep.Key(), o.Windows[0].Start).String(), o.Windows[0].TraceID)

	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?cluster=c1", &resp))
	assert.Len(t, resp.Objects, 2)
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?cluster=c1&limit=1", &resp))
	assert.Len(t, resp.Objects, 1, "the limit counts objects")
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?from=2026-11-29T18:00:00Z", &resp))
	assert.Empty(t, resp.Objects)
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/objects?from=2026-11-29T17:29:59Z&to=1795975200000000", &resp))
	assert.Len(t, resp.Objects, 2, "RFC 3339 and Unix microseconds both parse; the window overlaps")

	for _, bad := range []string{"from=yesterday", "to=x", "limit=0", "limit=abc", "from=2026-11-29T18:00:00Z&to=2026-11-29T17:00:00Z"} {
		assert.Equal(t, http.StatusBadRequest, get(t, srv.URL+"/api/objects?"+bad, nil), bad)
	}
}

func TestStoredTrace(t *testing.T) {
	_, srv := seeded(t)
	tid := aggregator.TraceIDFor(dep.Key(), time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC))
	var resp struct {
		Data []query.JaegerTrace `json:"data"`
	}
	require.Equal(t, http.StatusOK, get(t, srv.URL+"/api/stored-traces/"+tid.String(), &resp))
	require.Len(t, resp.Data, 1)
	tr := resp.Data[0]
	assert.Equal(t, tid.String(), tr.TraceID)
	kinds := map[string]int{}
	services := map[string]bool{}
	for _, s := range tr.Spans {
		for _, kv := range s.Tags {
			if kv.Key == "kelemetry.span.kind" {
				kinds[kv.Value.(string)]++
			}
		}
		services[tr.Processes[s.ProcessID].ServiceName] = true
		if s.OperationName == "alice update" {
			assert.Equal(t, t0.UnixMicro(), s.StartTime)
			assert.Equal(t, int64(5000), s.Duration)
			require.Len(t, s.Logs, 1)
			assert.Equal(t, []query.JaegerKeyValue{{Key: "event", Type: "string", Value: "error"}, {Key: "message", Type: "string", Value: "Conflict: try again"}}, s.Logs[0].Fields)
			assert.Contains(t, s.Tags, query.JaegerKeyValue{Key: "error", Type: "bool", Value: true})
			assert.Contains(t, s.Tags, query.JaegerKeyValue{Key: aggregator.AttrUser, Type: "string", Value: "alice"})
			require.Len(t, s.References, 1)
			assert.Equal(t, "CHILD_OF", s.References[0].RefType)
		}
	}
	assert.Equal(t, map[string]int{"object": 1, "event": 1, "link": 1}, kinds)
	assert.Equal(t, map[string]bool{"object": true, "audit": true, "link": true}, services)

	assert.Equal(t, http.StatusNotFound, get(t, srv.URL+"/api/stored-traces/0123456789abcdef", nil))
	assert.Equal(t, http.StatusBadRequest, get(t, srv.URL+"/api/stored-traces/not-hex", nil))
	assert.Equal(t, http.StatusBadRequest, get(t, srv.URL+"/api/stored-traces/0123456789abcdef0123456789abcdef0", nil))
}

func TestTraceIDFormat(t *testing.T) {
	id, err := query.ParseTraceID("1")
	require.NoError(t, err)
	assert.Equal(t, "0000000000000001", query.JaegerTraceID(id), "Jaeger drops a zero high half")
	full := "0123456789abcdef0123456789abcdef"
	id, err = query.ParseTraceID(full)
	require.NoError(t, err)
	assert.Equal(t, full, query.JaegerTraceID(id))
	_, err = query.ParseTraceID("")
	assert.Error(t, err)
}
