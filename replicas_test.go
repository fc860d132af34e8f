package kelemetry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/jaegertest"
	apiquery "github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/storageapi"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/jaeger"
)

// replica starts one process of the given role; with a backend, on the shared jaeger store,
// without one on a memory store.
func replica(t *testing.T, role string, backend *jaegertest.Backend, opts ...fx.Option) (*fxtest.App, *httpserver.Servers) {
	t.Helper()
	cfg := localConfig("")
	cfg.Role = role
	if role == kelemetry.RoleQuery {
		cfg.RemoteStorageAddr = "127.0.0.1:0"
	}
	if backend != nil {
		cfg.StoreBackend = store.BackendJaeger
		cfg.Jaeger = jaeger.Config{Endpoint: backend.Addr()}
		if role != kelemetry.RoleQuery {
			cfg.Jaeger.OTLP = otlpsink.Config{Endpoint: backend.Addr(), FlushInterval: 10 * time.Millisecond}
		}
	}
	var servers *httpserver.Servers
	app := fxtest.New(t, append([]fx.Option{kelemetry.Modules(role), fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger}, opts...)...)
	app.RequireStart()
	return app, servers
}

// rolloutTraces asks a process's Jaeger API for the rollout's Deployment with its related
// objects, reduced to what replicas must agree on: each span's operation, times, tags and log
// messages. Diff logs and deletion snapshots are left out: each ingest replica diffs against
// the versions it saw (see docs/operations/scaling.md).
func rolloutTraces(t *testing.T, apiAddr string) []string {
	t.Helper()
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`},
		"start": {"0"}, "end": {"1830000000000000"}}
	code, body := get(t, "http://"+apiAddr+"/api/traces?"+q.Encode())
	require.Equal(t, http.StatusOK, code, body)
	var resp struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	var out []string
	for _, tr := range resp.Data {
		for _, sp := range tr.Spans {
			line := fmt.Sprintf("%s %s %d", sp.OperationName, time.UnixMicro(sp.StartTime).UTC().Format(time.RFC3339Nano), sp.Duration)
			for _, tag := range sp.Tags {
				line += fmt.Sprintf(" %s=%v", tag.Key, tag.Value)
			}
			for _, l := range sp.Logs {
				for _, f := range l.Fields {
					if f.Key == "snapshot" || strings.HasSuffix(f.Key, "diff") || f.Key == "diff note" {
						continue // the object's versions as this replica saw them
					}
					line += fmt.Sprintf(" | %s=%v", f.Key, f.Value)
				}
			}
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return out
}

// Two ingest replicas each receive half of the webhook batches (alternating), and one stops in
// the middle (its batches then go to the other); a query replica that never ingested reads the
// shared backend, and its merged tree equals a single all-in-one's.
func TestReplicasShareOneStore(t *testing.T) {
	backend := jaegertest.New(t)
	single, singleServers := replica(t, kelemetry.RoleAll, nil)
	defer single.RequireStop()
	a, aServers := replica(t, kelemetry.RoleIngest, backend)
	b, bServers := replica(t, kelemetry.RoleIngest, backend)
	var storageAPI *storageapi.Listener
	query, queryServers := replica(t, kelemetry.RoleQuery, backend, fx.Populate(&storageAPI))
	defer query.RequireStop()
	resp, err := http.Post("http://"+queryServers.APIAddr()+"/audit/demo", "application/json", strings.NewReader(`{"items":[]}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a query replica serves no webhook")

	data, err := os.ReadFile(filepath.Join("testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	lines := slices.Collect(bytes.Lines(data))
	require.Greater(t, len(lines), 10)
	post := func(addr string, line []byte) int {
		resp, err := http.Post("http://"+addr+"/audit/demo", "application/json", bytes.NewReader(line))
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	resent := 0
	for i, line := range lines {
		require.Equal(t, http.StatusOK, post(singleServers.AuditAddr(), line))
		if i == len(lines)/2 {
			a.RequireStop() // a rolling update: it drains what it accepted
		}
		if post([2]string{aServers.AuditAddr(), bServers.AuditAddr()}[i%2], line) != http.StatusOK {
			resent++
			require.Equal(t, http.StatusOK, post(bServers.AuditAddr(), line))
		}
	}
	require.Positive(t, resent)
	// Stopping the ingest replica drains its queue and flushes its writer.
	b.RequireStop()
	waitCaughtUp(t, singleServers.APIAddr())
	require.True(t, demoTraceFound(t, singleServers.APIAddr()))

	want := rolloutTraces(t, singleServers.APIAddr())
	require.Greater(t, len(want), 10, "the Deployment, its ReplicaSets and Pods")
	got := rolloutTraces(t, queryServers.APIAddr())
	for _, line := range want {
		if !slices.Contains(got, line) {
			t.Errorf("missing on the query replica: %.400s", line)
		}
	}
	for _, line := range got {
		if !slices.Contains(want, line) {
			t.Errorf("only on the query replica: %.400s", line)
		}
	}

	// The search result's display ID resolves on the query replica: no prefix scan.
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"demo"}`}, "start": {"0"}}
	code, body := get(t, "http://"+queryServers.APIAddr()+"/api/traces?"+q.Encode())
	require.Equal(t, http.StatusOK, code, body)
	var found struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &found))
	require.Len(t, found.Data, 1)
	code, body = get(t, "http://"+queryServers.APIAddr()+"/api/traces/"+found.Data[0].TraceID)
	require.Equal(t, http.StatusOK, code, body)
	var byID struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &byID))
	require.Len(t, byID.Data, 1)
	assert.Len(t, byID.Data[0].Spans, len(found.Data[0].Spans))

	// A display ID of the earlier layout needs a prefix scan: the query replica says so.
	code, body = get(t, "http://"+queryServers.APIAddr()+"/api/traces/ff200000006b0c5308001518316dfb35")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "earlier release")

	// Its storage API serves the same merged tree from the shared store.
	assert.Len(t, found.Data[0].Spans, storageAPIFindDemo(t, storageAPI.Addr().String()))

	// The cluster list comes from the markers the ingest replicas wrote.
	code, body = get(t, "http://"+queryServers.APIAddr()+"/api/services/tracing/operations")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"demo"`)
}
