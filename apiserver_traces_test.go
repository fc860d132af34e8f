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
	apiquery "github.com/kelemetry/kelemetry/internal/query"
)

// The apiserver-traces fixture (e2e TestAPIServerTraces): Deployment web of 3 replicas in
// namespace traced, kube-apiserver tracing every request, a validating webhook holding each Pod
// create 1.5 s.
var (
	tracesAudit = filepath.Join("testdata", "apiserver-traces", "audit.jsonl")
	tracesSpans = filepath.Join("testdata", "apiserver-traces", "apiserver-spans.jsonl")
)

// startTraced starts the all-in-one with the join on; configure may replay files.
func startTraced(t *testing.T, configure func(*kelemetry.Config)) *httpserver.Servers {
	t.Helper()
	cfg := kelemetry.Config{Cluster: "test", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", OTLPAddr: "127.0.0.1:0"}
	cfg.APIServerTraces.Enabled = true
	if configure != nil {
		configure(&cfg)
	}
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return servers
}

// postLines posts each line of file to url (one request each, in the given order).
func postLines(t *testing.T, u, contentType string, lines [][]byte) {
	t.Helper()
	for _, line := range lines {
		resp, err := http.Post(u, contentType, bytes.NewReader(line))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
	}
}

func fileLines(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out [][]byte
	for line := range bytes.Lines(data) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			out = append(out, line)
		}
	}
	return out
}

// auditBatches wraps the audit log's events into webhook batches of n.
func auditBatches(t *testing.T, n int) [][]byte {
	t.Helper()
	var out [][]byte
	lines := fileLines(t, tracesAudit)
	for len(lines) > 0 {
		k := min(n, len(lines))
		out = append(out, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[`+string(bytes.Join(lines[:k], []byte(",")))+`]}`))
		lines = lines[k:]
	}
	return out
}

// requestTrees lists the stored request spans of the fixture's Pods and Deployment: each span's
// object, its path of names up to the event, its start and duration, its ID and its parent's.
func requestTrees(t *testing.T, apiAddr string) string {
	t.Helper()
	var lines []string
	for _, res := range []string{"pods", "replicasets", "deployments"} {
		var objs struct {
			Objects []struct {
				Name    string `json:"name"`
				Windows []struct {
					TraceID string `json:"traceID"`
				} `json:"windows"`
			} `json:"objects"`
		}
		code, body := get(t, "http://"+apiAddr+"/api/objects?"+url.Values{"resource": {res}, "namespace": {"traced"}}.Encode())
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &objs))
		for _, o := range objs.Objects {
			for _, w := range o.Windows {
				code, body := get(t, "http://"+apiAddr+"/api/stored-traces/"+w.TraceID)
				require.Equal(t, http.StatusOK, code)
				var tr struct {
					Data []apiquery.JaegerTrace `json:"data"`
				}
				require.NoError(t, json.Unmarshal([]byte(body), &tr))
				require.Len(t, tr.Data, 1)
				byID := map[string]apiquery.JaegerSpan{}
				for _, sp := range tr.Data[0].Spans {
					byID[sp.SpanID] = sp
				}
				for _, sp := range tr.Data[0].Spans {
					if tag(sp, "kelemetry.span.kind") != "request" {
						continue
					}
					path, parent := []string{sp.OperationName}, ""
					for cur := sp; len(cur.References) > 0; {
						p, ok := byID[cur.References[0].SpanID]
						if parent == "" {
							parent = cur.References[0].SpanID
						}
						if !ok {
							path = append(path, "?")
							break
						}
						path = append(path, p.OperationName)
						if tag(p, "kelemetry.span.kind") != "request" {
							break
						}
						cur = p
					}
					slices.Reverse(path)
					lines = append(lines, fmt.Sprintf("%s/%s %s @%d +%d %s<%s", res, o.Name, strings.Join(path, " > "), sp.StartTime, sp.Duration, sp.SpanID, parent))
				}
			}
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func tag(sp apiquery.JaegerSpan, key string) string {
	for _, kv := range sp.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// settled waits until the app has handled everything and its request spans stopped changing.
func settled(t *testing.T, apiAddr string) string {
	t.Helper()
	waitCaughtUp(t, apiAddr)
	var last string
	require.Eventually(t, func() bool {
		cur := requestTrees(t, apiAddr)
		done := cur != "" && cur == last
		last = cur
		return done
	}, 30*time.Second, 500*time.Millisecond)
	return last
}

// TestAPIServerTracesAnyOrder: the recorded request spans and audit log give the same stored
// spans (names, times, IDs, parents) in any order: both replayed at start, the audit log first and
// the spans later over OTLP/HTTP (in reverse order), the spans first and the audit log later over
// the webhook. Each Pod create holds the webhook call of about 1.5 s under its event, and the
// Deployment's critical path names it.
func TestAPIServerTracesAnyOrder(t *testing.T) {
	both := startTraced(t, func(c *kelemetry.Config) {
		c.Audit.Replay = []string{tracesAudit}
		c.APIServerTraces.Replay = []string{tracesSpans}
	})
	want := settled(t, both.APIAddr())

	auditFirst := startTraced(t, func(c *kelemetry.Config) { c.Audit.Replay = []string{tracesAudit} })
	waitCaughtUp(t, auditFirst.APIAddr())
	spans := fileLines(t, tracesSpans)
	slices.Reverse(spans)
	postLines(t, "http://"+auditFirst.OTLPAddr()+"/v1/traces", "application/json", spans)
	assert.Equal(t, want, settled(t, auditFirst.APIAddr()), "the audit log first, the spans reversed")

	spansFirst := startTraced(t, nil)
	postLines(t, "http://"+spansFirst.OTLPAddr()+"/v1/traces", "application/json", fileLines(t, tracesSpans))
	postLines(t, "http://"+spansFirst.AuditAddr()+"/audit/test", "application/json", auditBatches(t, 7))
	assert.Equal(t, want, settled(t, spansFirst.APIAddr()), "the spans first")

	creates := 0
	for _, line := range strings.Split(want, "\n") {
		if strings.HasPrefix(line, "pods/") && strings.Contains(line, "> Call validating webhook @") {
			creates++
			var at, d int64
			_, err := fmt.Sscanf(line[strings.Index(line, "@"):], "@%d +%d", &at, &d)
			require.NoError(t, err)
			assert.InDelta(t, 1.5e6, float64(d), 0.3e6, line)
		}
	}
	assert.Equal(t, 3, creates, "one webhook call under each Pod's create")

	// The critical path of the Deployment's tree names the webhook.
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"web"}`}, "start": {"0"}}
	code, body := get(t, "http://"+both.APIAddr()+"/api/traces?"+q.Encode())
	require.Equal(t, http.StatusOK, code)
	var found struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &found))
	require.Len(t, found.Data, 1)
	code, body = get(t, "http://"+both.APIAddr()+"/api/critical-path/"+found.Data[0].TraceID)
	require.Equal(t, http.StatusOK, code)
	var cp struct {
		Data apiquery.CriticalPath `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &cp))
	raw, _ := json.Marshal(cp.Data)
	var view struct {
		SlowestRequest *struct {
			Controller, Verb, SlowPart string
			SlowPartSeconds            float64
		} `json:"slowestRequest"`
	}
	require.NoError(t, json.Unmarshal(raw, &view))
	require.NotNil(t, view.SlowestRequest, "%s", raw)
	assert.Equal(t, "validating webhook delay.e2e.kelemetry.dev", view.SlowestRequest.SlowPart)
	assert.InDelta(t, 1.5, view.SlowestRequest.SlowPartSeconds, 0.3)
	assert.Equal(t, "replicaset-controller", view.SlowestRequest.Controller)
}
