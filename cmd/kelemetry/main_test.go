package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/natstest"
	apiquery "github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/kube"
)

var rolloutLog = filepath.Join("..", "..", "testdata", "rollout", "audit.jsonl")

// TestMain fails the package's tests when a goroutine outlives them.
func TestMain(m *testing.M) {
	// The embedded nats-server's own goroutines (the tests with the NATS queue) are let go.
	goleak.VerifyTestMain(m, append(natstest.IgnoreLeaks(), goleak.Cleanup(func(code int) {
		removeHeavyFixture() // the memory tests' binary and data
		os.Exit(code)
	}))...)
}

func testConfig(t *testing.T, dataDir string) kelemetry.Config {
	t.Helper()
	cfg := kelemetry.Config{
		Cluster:   "test",
		AuditAddr: "127.0.0.1:0",
		HTTPAddr:  "127.0.0.1:0",
		DataDir:   dataDir,
	}
	if dataDir != "" {
		cfg.Store.MaxAge = fixtureMaxAge
	}
	return cfg
}

// fixtureMaxAge is the embedded store's maxAge in the tests: the fixtures were recorded on
// 2026-11-29, and with the default of 7 days the store's retention deletes their windows when
// it starts (from 2026-12-06 17:30 UTC on). keepFixtures is the same as a flag.
const fixtureMaxAge = 100 * 365 * 24 * time.Hour

var keepFixtures = "--set=store.maxAge=" + fixtureMaxAge.String()

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type running struct {
	app     *fx.App
	servers *httpserver.Servers
}

func (r running) api(path string) string   { return "http://" + r.servers.APIAddr() + path }
func (r running) audit(path string) string { return "http://" + r.servers.AuditAddr() + path }

func start(t *testing.T, cfg kelemetry.Config) running {
	t.Helper()
	var servers *httpserver.Servers
	app := newApp(cfg, testLogger(t), fx.Populate(&servers), fx.NopLogger)
	require.NoError(t, app.Err())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, app.Start(ctx))
	r := running{app: app, servers: servers}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r running) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = r.app.Stop(ctx)
}

func getJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, out), string(body))
	}
	return resp.StatusCode
}

// waitReplay waits until the start-up replay is done and the tracer has caught up: every
// replayed event handled and every link job finished.
func waitReplay(t *testing.T, r running) {
	t.Helper()
	require.Eventually(t, func() bool {
		var h healthz.Body
		return getJSON(t, r.api("/healthz"), &h) == http.StatusOK && h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
	}, 60*time.Second, 20*time.Millisecond)
}

func findObject(t *testing.T, r running, query string) apiquery.ObjectResult {
	t.Helper()
	var resp apiquery.ObjectsResponse
	var objs []apiquery.ObjectResult
	// Links are written by background workers: wait until they settle.
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, getJSON(t, r.api("/api/objects?"+query), &resp))
		objs = resp.Objects
		return len(objs) == 1
	}, 10*time.Second, 20*time.Millisecond, "objects for %s: %+v", query, objs)
	return objs[0]
}

func storedTrace(t *testing.T, r running, id string) apiquery.JaegerTrace {
	t.Helper()
	var resp struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, r.api("/api/stored-traces/"+id), &resp))
	require.Len(t, resp.Data, 1)
	return resp.Data[0]
}

func tag(s apiquery.JaegerSpan, key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			v, _ := kv.Value.(string)
			return v
		}
	}
	return ""
}

func spansOfKind(tr apiquery.JaegerTrace, kind string) []apiquery.JaegerSpan {
	var out []apiquery.JaegerSpan
	for _, s := range tr.Spans {
		if tag(s, "kelemetry.span.kind") == kind {
			out = append(out, s)
		}
	}
	return out
}

func links(tr apiquery.JaegerTrace, role string) map[string]bool {
	out := map[string]bool{}
	for _, s := range spansOfKind(tr, "link") {
		if tag(s, "kelemetry.link.role") == role {
			out[tag(s, "kelemetry.link.resource")+"/"+tag(s, "kelemetry.link.name")] = true
		}
	}
	return out
}

func TestValidateApp(t *testing.T) {
	require.NoError(t, fx.ValidateApp(kelemetry.Module, fx.Supply(kelemetry.Config{}, slog.Default()), fx.NopLogger))
}

func TestParseFlags(t *testing.T) {
	cfg, level, err := parseFlags([]string{"--cluster", "c1", "--data-dir", "", "--window", "5m", "--replay", "a.log", "--replay", "b.log", "--log-level", "debug"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "c1", cfg.Cluster)
	assert.Equal(t, "", cfg.DataDir)
	assert.Equal(t, 5*time.Minute, cfg.Window)
	assert.Equal(t, []string{"a.log", "b.log"}, cfg.Audit.Replay)
	assert.Equal(t, slog.LevelDebug, level)

	cfg, _, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "./kelemetry-data", cfg.DataDir)
	assert.Equal(t, "127.0.0.1:8080", cfg.AuditAddr, "localhost unless configured")
	assert.Equal(t, "127.0.0.1:16686", cfg.HTTPAddr, "localhost unless configured")
	assert.Empty(t, cfg.RemoteStorageAddr, "the storage API is off unless configured")
	cfg, _, err = parseFlags([]string{"--remote-storage-addr", "127.0.0.1:17271"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:17271", cfg.RemoteStorageAddr)

	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("cluster: fromfile\nhttpAddr: \":1234\"\nwindow: 10m\n"), 0o600))
	cfg, _, err = parseFlags([]string{"--config", file, "--http-addr", ":999"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "fromfile", cfg.Cluster)
	assert.Equal(t, ":999", cfg.HTTPAddr, "flags override the file")
	assert.Equal(t, 10*time.Minute, cfg.Window)

	require.NoError(t, os.WriteFile(file, []byte("clutser: typo\n"), 0o600))
	_, _, err = parseFlags([]string{"--config", file}, io.Discard)
	assert.ErrorContains(t, err, "clutser")
	_, _, err = parseFlags([]string{"--window", "1ms"}, io.Discard)
	assert.Error(t, err)
}

func TestParseClusterFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg, _, err := parseFlags([]string{"--cluster", "wl", "--kubeconfig", kc, "--cluster-kubeconfig", "mgmt=" + kc,
		"--kube-qps", "20", "--kube-burst", "40", "--diff-leader-elect", "--diff-leader-elect-namespace", "kelemetry",
		"--diff-leader-elect-identity", "replica-1"}, io.Discard)
	require.NoError(t, err)
	got := cfg.KubeClusters()
	require.Len(t, got, 2)
	assert.Equal(t, kube.ClusterConfig{Name: "wl", Kubeconfig: kc, QPS: 20, Burst: 40}, got[0])
	assert.Equal(t, kube.ClusterConfig{Name: "mgmt", Kubeconfig: kc, QPS: 20, Burst: 40}, got[1])
	assert.True(t, cfg.Event.Watch, "the cluster named --cluster has a kubeconfig")
	assert.Equal(t, []string{"mgmt"}, cfg.Event.WatchClusters, "every cluster's Events")
	assert.True(t, cfg.InformerDiff.Enabled)
	le := cfg.InformerDiff.LeaderElection
	assert.True(t, le.Enabled)
	assert.Equal(t, "kelemetry", le.LeaseNamespace)
	assert.Equal(t, "replica-1", le.Identity)

	// Only another cluster: no Event watch (it watches the cluster named --cluster), informers on.
	cfg, _, err = parseFlags([]string{"--cluster-kubeconfig", "mgmt=" + kc}, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.Event.Watch)
	assert.True(t, cfg.InformerDiff.Enabled)
	assert.Equal(t, []kube.ClusterConfig{{Name: "mgmt", Kubeconfig: kc, QPS: kelemetry.DefaultKubeQPS, Burst: kelemetry.DefaultKubeBurst}}, cfg.KubeClusters())

	for _, bad := range [][]string{{"--cluster-kubeconfig", "mgmt"}, {"--cluster-kubeconfig", "=x"}, {"--cluster-kubeconfig", "a=" + kc, "--cluster-kubeconfig", "a=" + kc}} {
		_, _, err = parseFlags(bad, io.Discard)
		assert.Error(t, err, bad)
	}
	cfg, _, err = parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.InformerDiff.LeaderElection.Enabled, "no kubeconfig: nothing to elect on")
}

// TestReplayRolloutEndToEnd is the core issue's acceptance path: replay the recorded rollout into
// the embedded store, find the Deployment, read its stored trace, restart, replay again.
func TestReplayRolloutEndToEnd(t *testing.T) {
	dataDir := t.TempDir()
	cfg := testConfig(t, dataDir)
	cfg.Audit.Replay = []string{rolloutLog}
	r := start(t, cfg)
	waitReplay(t, r)
	// /healthz shows each file's progress in camelCase: the file, its bytes, lines and events.
	var raw map[string]any
	require.Equal(t, http.StatusOK, getJSON(t, r.api("/healthz"), &raw))
	files := raw["replay"].(map[string]any)["files"].([]any)
	require.Len(t, files, 1)
	f := files[0].(map[string]any)
	fi, err := os.Stat(rolloutLog)
	require.NoError(t, err)
	assert.Equal(t, rolloutLog, f["file"])
	assert.Equal(t, true, f["done"])
	assert.InDelta(t, fi.Size(), f["bytesRead"], 0)
	assert.InDelta(t, fi.Size(), f["bytesTotal"], 0)
	assert.Greater(t, f["events"], 100.0)
	assert.Equal(t, f["lines"], f["events"], "one event a line")
	assert.Greater(t, f["eventsPerSecond"], 0.0)

	dep := findObject(t, r, "resource=deployments&name=demo")
	assert.Equal(t, "test", dep.Cluster)
	assert.Equal(t, "apps", dep.Group)
	assert.Equal(t, "default", dep.Namespace)
	require.Len(t, dep.Windows, 1)

	var rsNames []string
	require.Eventually(t, func() bool {
		tr := storedTrace(t, r, dep.Windows[0].TraceID)
		rsNames = nil
		for k := range links(tr, "child") {
			rsNames = append(rsNames, k)
		}
		return len(rsNames) == 2
	}, 10*time.Second, 20*time.Millisecond)
	tr := storedTrace(t, r, dep.Windows[0].TraceID)
	roots := spansOfKind(tr, "object")
	require.Len(t, roots, 1)
	assert.Equal(t, "deployments/demo", roots[0].OperationName)
	assert.Empty(t, roots[0].References)
	var titles []string
	for _, s := range spansOfKind(tr, "event") {
		titles = append(titles, s.OperationName)
		require.Len(t, s.References, 1)
		assert.Equal(t, roots[0].SpanID, s.References[0].SpanID)
	}
	assert.Contains(t, titles, "admin create")
	assert.Contains(t, titles, "admin patch scale")
	assert.Contains(t, titles, "admin delete")
	assert.Contains(t, titles, "system:serviceaccount:kube-system:deployment-controller update status")

	// Each ReplicaSet links up to the Deployment and down to its Pods.
	for _, rs := range rsNames {
		obj := findObject(t, r, "resource=replicasets&name="+strings.TrimPrefix(rs, "replicasets/"))
		rtr := storedTrace(t, r, obj.Windows[0].TraceID)
		assert.Equal(t, map[string]bool{"deployments/demo": true}, links(rtr, "parent"), rs)
		assert.NotEmpty(t, links(rtr, "child"), "%s links down to its pods", rs)
		for pod := range links(rtr, "child") {
			assert.True(t, strings.HasPrefix(pod, "pods/"+strings.TrimPrefix(rs, "replicasets/")), pod)
		}
	}
	spanCount := len(tr.Spans)

	// Restart on the same data dir and replay the same file again: the traces are still there,
	// and no span is stored twice.
	r.stop(t)
	r2 := start(t, cfg)
	waitReplay(t, r2)
	dep2 := findObject(t, r2, "resource=deployments&name=demo")
	assert.Equal(t, dep.Windows, dep2.Windows)
	tr2 := storedTrace(t, r2, dep.Windows[0].TraceID)
	assert.Len(t, tr2.Spans, spanCount, "replaying the same file stores no duplicate span")
	ids := map[string]bool{}
	for _, s := range tr2.Spans {
		assert.False(t, ids[s.SpanID], "duplicate span %s", s.SpanID)
		ids[s.SpanID] = true
	}
}

func readBatches(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

func post(t *testing.T, url string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestWebhookStatusCodes(t *testing.T) {
	cfg := testConfig(t, "")
	cfg.Audit.Webhook.MaxBodyBytes = 1 << 20
	r := start(t, cfg)
	batches := readBatches(t)

	// A malformed batch and a good one at the same time: 400 with a reason, and the good batch
	// lands intact.
	var wg sync.WaitGroup
	var badCode, goodCode int
	var badBody string
	wg.Add(2)
	go func() {
		defer wg.Done()
		badCode, badBody = post(t, r.audit("/audit/alpha"), []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"auditID":`))
	}()
	go func() { defer wg.Done(); goodCode, _ = post(t, r.audit("/audit/alpha"), batches[0]) }()
	wg.Wait()
	assert.Equal(t, http.StatusBadRequest, badCode)
	assert.NotEmpty(t, strings.TrimSpace(badBody), "400 says why")
	assert.Equal(t, http.StatusOK, goodCode)

	code, body := post(t, r.audit("/audit"), []byte(`{"kind":"PodList","apiVersion":"v1","items":[]}`))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "PodList")

	big := append([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[],"pad":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	big = append(big, []byte(`"}`)...)
	code, _ = post(t, r.audit("/audit"), big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)

	// The good batch's objects are stored under the cluster named in the path.
	var resp apiquery.ObjectsResponse
	require.Eventually(t, func() bool {
		getJSON(t, r.api("/api/objects?cluster=alpha"), &resp)
		return len(resp.Objects) > 0
	}, 10*time.Second, 20*time.Millisecond)
	for _, o := range resp.Objects {
		assert.Equal(t, "alpha", o.Cluster)
	}
	var none apiquery.ObjectsResponse
	getJSON(t, r.api("/api/objects?cluster=127.0.0.1"), &none)
	assert.Empty(t, none.Objects, "the cluster never comes from the client address")
}

// gateSink blocks every export until released, so the audit queue fills up deterministically.
type gateSink struct{ release chan struct{} }

func (g *gateSink) Export(ctx context.Context, _ []*aggregator.Span) error {
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return nil
}

func TestWebhookShedsLoadWith429(t *testing.T) {
	batches := readBatches(t)
	largest := 0
	for _, b := range batches {
		var list struct{ Items []json.RawMessage }
		require.NoError(t, json.Unmarshal(b, &list))
		largest = max(largest, len(list.Items))
	}
	cfg := testConfig(t, "")
	cfg.Audit.Queue.Capacity = 2 * largest
	cfg.Audit.Queue.Partitions = 1
	gate := &gateSink{release: make(chan struct{})}
	var servers *httpserver.Servers
	app := newApp(cfg, testLogger(t), fx.Populate(&servers), fx.NopLogger,
		fx.Provide(aggregator.AsSink(func() *gateSink { return gate })))
	require.NoError(t, app.Start(context.Background()))
	r := running{app: app, servers: servers}

	codes := map[int]int{}
	for i := 0; i < 10*len(batches) && codes[http.StatusTooManyRequests] == 0; i++ {
		code, _ := post(t, r.audit("/audit"), batches[i%len(batches)])
		codes[code]++
	}
	assert.Positive(t, codes[http.StatusOK], "batches are accepted while there is room")
	assert.Positive(t, codes[http.StatusTooManyRequests], "a full queue answers 429: %v", codes)
	assert.Len(t, codes, 2, "only 200 and 429: %v", codes)
	close(gate.release)
	require.Eventually(t, func() bool {
		var h healthz.Body
		return getJSON(t, r.api("/healthz"), &h) == http.StatusOK && h.QueueDepth == 0
	}, 10*time.Second, 20*time.Millisecond, "the queue drains once the sink is back")
	code, _ := post(t, r.audit("/audit"), batches[0])
	assert.Equal(t, http.StatusOK, code)
	r.stop(t)
}

func TestMetricsEndpoint(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Audit.Replay = []string{rolloutLog}
	r := start(t, cfg)
	waitReplay(t, r)
	resp, err := http.Get(r.api("/metrics"))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	text := string(body)
	for _, name := range []string{
		"kelemetry_audit_queue_accepted",
		"kelemetry_audit_queue_depth",
		"kelemetry_aggregator_spans",
		"kelemetry_store_spans_written",
		"kelemetry_store_size",
		"kelemetry_audit_consumer_events",
		"kelemetry_aggregator_link_jobs",
	} {
		assert.Contains(t, text, name, fmt.Sprintf("metric %s", name))
	}
}

// TestStopDrainsQueue: what the webhook accepted right before shutdown (SIGTERM takes the same
// path: app.Stop) is in the store after a restart.
func TestStopDrainsQueue(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	r := start(t, cfg)
	batches := readBatches(t)
	for _, b := range batches {
		code, body := post(t, r.audit("/audit/drain"), b)
		require.Equal(t, http.StatusOK, code, body)
	}
	r.stop(t)

	r2 := start(t, cfg)
	dep := findObject(t, r2, "cluster=drain&resource=deployments&name=demo")
	tr := storedTrace(t, r2, dep.Windows[0].TraceID)
	var titles []string
	for _, s := range spansOfKind(tr, "event") {
		titles = append(titles, s.OperationName)
	}
	assert.Contains(t, titles, "admin delete", "the last batch's events were drained into the store")
}

// TestJaegerAPI: the Jaeger-compatible search over the replayed rollout gives one Deployment tree.
func TestJaegerAPI(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Audit.Replay = []string{rolloutLog}
	r := start(t, cfg)
	waitReplay(t, r)
	var services struct {
		Data []string `json:"data"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, r.api("/api/services"), &services))
	assert.Contains(t, services.Data, "tracing")

	var resp struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	q := "/api/traces?service=tracing%20%5Bfull%20tree%5D&tags=" + url.QueryEscape(`{"resource":"deployments","name":"demo"}`) +
		"&start=0&end=" + fmt.Sprint(time.Now().UnixMicro())
	names := map[string]bool{}
	rsCount := 0
	// Links are written by background workers: wait until both ReplicaSets are in the tree.
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, getJSON(t, r.api(q), &resp))
		require.Len(t, resp.Data, 1)
		names, rsCount = map[string]bool{}, 0
		for _, s := range resp.Data[0].Spans {
			res := tag(s, aggregator.AttrResource)
			names[res+"/"+tag(s, aggregator.AttrName)] = true
			if res == "replicasets" && tag(s, "kelemetry.span.kind") == "object" {
				rsCount++
			}
		}
		return rsCount == 2
	}, 10*time.Second, 50*time.Millisecond)
	assert.True(t, names["deployments/demo"], "%v", names)

	var byID struct {
		Data []apiquery.JaegerTrace `json:"data"`
	}
	// The ID resolves to the same tree (once the background link jobs have all landed, a search
	// and a fetch by ID see the same spans).
	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, getJSON(t, r.api(q), &resp))
		require.Equal(t, http.StatusOK, getJSON(t, r.api("/api/traces/"+resp.Data[0].TraceID), &byID))
		require.Len(t, byID.Data, 1)
		return len(byID.Data[0].Spans) == len(resp.Data[0].Spans)
	}, 10*time.Second, 50*time.Millisecond)
}

// TestLinkRulesFromDir: a LinkRule from a --link-rules directory links the replayed Pods to the
// ConfigMap and the ServiceAccount they use, with no cluster: both objects meet in one trace.
func TestLinkRulesFromDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pods.yaml"), []byte(`
apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata: {name: pod-uses}
spec:
  source:
    resources: [{group: "", resource: pods}]
    labelSelector: {matchLabels: {app: demo}}
  role: parent
  class: uses
  targets:
    - resource: configmaps
      version: v1
      name: object.spec.volumes.map(v, v.?projected.sources.orValue([]).filter(s, has(s.configMap)).map(s, s.configMap.name)).flatten()
    - resource: serviceaccounts
      version: v1
      name: object.spec.serviceAccountName
`), 0o600))
	cfg, _, err := parseFlags([]string{"--link-rules", dir}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, dir, cfg.LinkRules.Dir)

	cfg = testConfig(t, "")
	cfg.LinkRules.Dir = dir
	cfg.Audit.Replay = []string{rolloutLog}
	r := start(t, cfg)
	waitReplay(t, r)

	cm := findObject(t, r, "resource=configmaps&name=kube-root-ca.crt")
	var pods map[string]bool
	require.Eventually(t, func() bool {
		pods = links(storedTrace(t, r, cm.Windows[0].TraceID), "child")
		return len(pods) > 0
	}, 10*time.Second, 20*time.Millisecond)
	for pod := range pods {
		assert.True(t, strings.HasPrefix(pod, "pods/demo-"), pod)
	}
	sa := findObject(t, r, "resource=serviceaccounts&name=default")
	assert.Equal(t, "test", sa.Cluster)

	// The Pod's trace holds both parents, classed "uses", next to its ReplicaSet owner.
	var pod string
	for p := range pods {
		pod = strings.TrimPrefix(p, "pods/")
		break
	}
	po := findObject(t, r, "resource=pods&name="+pod)
	require.Eventually(t, func() bool {
		parents := links(storedTrace(t, r, po.Windows[0].TraceID), "parent")
		return parents["configmaps/kube-root-ca.crt"] && parents["serviceaccounts/default"]
	}, 10*time.Second, 20*time.Millisecond)
	var classes []string
	for _, s := range spansOfKind(storedTrace(t, r, po.Windows[0].TraceID), "link") {
		if tag(s, "kelemetry.link.resource") == "configmaps" {
			classes = append(classes, tag(s, "kelemetry.link.class"))
		}
	}
	assert.Equal(t, []string{"uses"}, classes)
}

// The web UI is served at / next to the APIs, and its search endpoint finds the replayed
// Deployment.
func TestWebUIServed(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Audit.Replay = []string{rolloutLog}
	r := start(t, cfg)
	waitReplay(t, r)
	get := func(path string) (int, string, string) {
		resp, err := http.Get(r.api(path))
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
	}
	code, ctype, body := get("/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, ctype, "text/html")
	assert.Contains(t, body, "Kelemetry")
	code, _, body = get("/api/ui/search?service=tracing&tag=resource:deployments&tag=name:demo&start=0&end=" + fmt.Sprint(time.Now().UnixMicro()))
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "demo")
	code, _, _ = get("/healthz")
	assert.Equal(t, http.StatusOK, code, "the UI does not shadow the API")
}

func TestParseFlagsDumpForward(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--data-dir", "", "--audit-dump", "/tmp/dump.jsonl",
		"--audit-forward", "http://b:8080/audit/{cluster}", "--audit-forward", "https://c/audit"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "/tmp/dump.jsonl", cfg.Audit.Dump.Path)
	assert.Equal(t, []tap.ForwardConfig{{URL: "http://b:8080/audit/{cluster}"}, {URL: "https://c/audit"}}, cfg.Audit.Forward)
	_, _, err = parseFlags([]string{"--audit-forward", "ftp://x"}, io.Discard)
	assert.ErrorContains(t, err, "want http or https")
}
