package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/internal/query"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// startProc runs a binary until the test ends (killed then) and returns its command and a channel
// closed when it exits.
func startProc(t *testing.T, bin string, args ...string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, exited
}

// auditPod is one audit event of a Pod's creation whose response mounts ConfigMap cm.
func auditPod(name, cm string, at time.Time) map[string]any {
	ts := at.UTC().Format(time.RFC3339Nano)
	return map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse",
		"auditID": "e2e-" + name, "stage": "ResponseComplete", "verb": "create",
		"requestURI":     "/api/v1/namespaces/default/pods",
		"user":           map[string]any{"username": "admin"},
		"objectRef":      map[string]any{"resource": "pods", "namespace": "default", "name": name, "apiVersion": "v1"},
		"responseStatus": map[string]any{"code": 201},
		"responseObject": map[string]any{"kind": "Pod", "apiVersion": "v1",
			"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": "1"},
			"spec":     map[string]any{"volumes": []any{map[string]any{"name": "cfg", "configMap": map[string]any{"name": cm}}}}},
		"requestReceivedTimestamp": ts, "stageTimestamp": ts,
	}
}

func postAudit(t *testing.T, webhook string, events ...map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": events})
	require.NoError(t, err)
	resp, err := http.Post(webhook, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}

func getJSON(t *testing.T, u string, out any) bool {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(out) == nil
}

// podLinks returns the link targets stored in the trace of Pod name, once it is found.
func podLinks(t *testing.T, api, name string) map[string]bool {
	t.Helper()
	var objs query.ObjectsResponse
	if !getJSON(t, api+"/api/objects?resource=pods&name="+url.QueryEscape(name), &objs) || len(objs.Objects) != 1 ||
		len(objs.Objects[0].Windows) == 0 {
		return nil
	}
	var tr struct {
		Data []query.JaegerTrace `json:"data"`
	}
	if !getJSON(t, api+"/api/stored-traces/"+objs.Objects[0].Windows[0].TraceID, &tr) || len(tr.Data) != 1 {
		return nil
	}
	out := map[string]bool{}
	for _, s := range tr.Data[0].Spans {
		tags := map[string]string{}
		for _, kv := range s.Tags {
			if v, ok := kv.Value.(string); ok {
				tags[kv.Key] = v
			}
		}
		if tags["kelemetry.span.kind"] == "link" {
			out[tags["kelemetry.link.resource"]+"/"+tags["kelemetry.link.name"]+":"+tags["kelemetry.link.class"]] = true
		}
	}
	return out
}

// metricValue sums the Prometheus samples of name whose labels contain every one of labels.
func metricValue(t *testing.T, api, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var total float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

// TestEndToEnd builds the real all-in-one and linker worker, connects both to an embedded
// nats-server, posts audit events to the webhook and finds the worker's links in the stored
// trace through the query API; then kills the worker: ingestion goes on, and the missing worker
// is counted.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	// NATS.
	natsURL := natstest.Start(t, nil).URL()

	// Both binaries.
	dir := t.TempDir()
	allinone, worker := filepath.Join(dir, "kelemetry"), filepath.Join(dir, "linkerworker")
	out, err := exec.Command("go", "build", "-o", allinone, "../../cmd/kelemetry").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("go", "build", "-o", worker, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	workerCmd, workerExited := startProc(t, worker, "--nats-url", natsURL, "--log-level", "warn")
	// The worker is up once it answers a job.
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool {
		msg, err := nc.Request("kelemetry.link.volumes", []byte(`{"v":1,"object":{"resource":"pods","name":"probe"}}`), time.Second)
		return err == nil && bytes.Contains(msg.Data, []byte(`"v":1`))
	}, 30*time.Second, 50*time.Millisecond, "the worker does not answer")

	auditAddr, apiAddr := freeAddr(t), freeAddr(t)
	startProc(t, allinone, "--cluster=e2e", "--data-dir=", "--audit-addr="+auditAddr, "--http-addr="+apiAddr,
		"--log-level=warn", "--remote-linker=volumes", "--remote-linker-nats-url="+natsURL, "--remote-linker-timeout=1s")
	api, webhook := "http://"+apiAddr, "http://"+auditAddr+"/audit/e2e"
	require.Eventually(t, func() bool {
		var h map[string]any
		return getJSON(t, api+"/healthz", &h)
	}, 60*time.Second, 50*time.Millisecond, "the all-in-one does not come up")

	// The worker's link is in the Pod's trace.
	now := time.Now()
	postAudit(t, webhook, auditPod("web-1", "settings", now))
	require.Eventually(t, func() bool { return podLinks(t, api, "web-1")["configmaps/settings:volumes"] }, 20*time.Second, 50*time.Millisecond,
		"the worker's link is stored: %v", podLinks(t, api, "web-1"))
	assert.GreaterOrEqual(t, metricValue(t, api, "kelemetry_remotelinker_jobs_total", `linker="volumes"`, `result="ok"`), 1.0)

	// Kill the worker: ingestion goes on, the jobs fail fast and are counted.
	require.NoError(t, workerCmd.Process.Kill())
	<-workerExited
	before := metricValue(t, api, "kelemetry_remotelinker_jobs_total", `result="no_responders"`) +
		metricValue(t, api, "kelemetry_remotelinker_jobs_total", `result="timeout"`)
	start := time.Now()
	for i := range 5 {
		postAudit(t, webhook, auditPod(fmt.Sprintf("web-down-%d", i), "settings", now.Add(time.Second)))
	}
	assert.Less(t, time.Since(start), 5*time.Second, "the webhook answers without waiting for the worker")
	for i := range 5 {
		name := fmt.Sprintf("web-down-%d", i)
		require.Eventually(t, func() bool { return podLinks(t, api, name) != nil }, 20*time.Second, 50*time.Millisecond, "pod %s stored", name)
		assert.Empty(t, podLinks(t, api, name), "no worker, no volume link")
	}
	require.Eventually(t, func() bool {
		after := metricValue(t, api, "kelemetry_remotelinker_jobs_total", `result="no_responders"`) +
			metricValue(t, api, "kelemetry_remotelinker_jobs_total", `result="timeout"`)
		return after >= before+5
	}, 10*time.Second, 50*time.Millisecond, "every job without a worker is counted")
}
