package kelemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/healthz"
)

// smallVolume mounts a tmpfs of size bytes for the test (root only; skipped where mounting is
// not allowed) and returns its folder.
func smallVolume(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file in dir until the filesystem is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	for _, n := range []int{4096, 512, 1} { // the last partial blocks too
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// postBatch posts body to the webhook and returns the status, Retry-After and the answer.
func postBatch(t *testing.T, auditAddr string, body []byte) (int, string, string) {
	t.Helper()
	resp, err := http.Post("http://"+auditAddr+"/audit/demo", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(msg)
}

// metricValue sums the samples of the metric name on the /metrics page of the API listener.
func metricValue(t *testing.T, apiAddr, name string) float64 {
	t.Helper()
	code, body := get(t, "http://"+apiAddr+"/metrics")
	require.Equal(t, http.StatusOK, code, body)
	var sum float64
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		require.NotEmpty(t, fields, line)
		v, err := strconv.ParseFloat(fields[0], 64)
		require.NoError(t, err, line)
		sum += v
	}
	return sum
}

// getHealthz reads /healthz whatever its status.
func getHealthz(t *testing.T, apiAddr string) (int, healthz.Body) {
	t.Helper()
	code, body := get(t, "http://"+apiAddr+"/healthz")
	var h healthz.Body
	require.NoError(t, json.Unmarshal([]byte(body), &h), body)
	return code, h
}

// bigBatch is a webhook batch of one audit event with a request body of about n bytes.
func bigBatch(n int) []byte {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	pod := `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"big","namespace":"default","annotations":{"x":"` +
		string(bytes.Repeat([]byte("a"), n)) + `"}}}`
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"RequestResponse",` +
		`"auditID":"big-` + strconv.FormatInt(time.Now().UnixNano(), 10) + `","stage":"ResponseComplete",` +
		`"requestURI":"/api/v1/namespaces/default/pods","verb":"create","user":{"username":"admin"},` +
		`"objectRef":{"resource":"pods","namespace":"default","name":"big","apiVersion":"v1"},` +
		`"responseStatus":{"code":201},"requestObject":` + pod + `,` +
		`"requestReceivedTimestamp":"` + now + `","stageTimestamp":"` + now + `"}]}`)
}

// A failed write of the durable queue's log (its volume full) does not wedge the webhook: it
// answers 503 with Retry-After, /healthz says why, and once space is back the queue probes a new
// file and takes batches again by itself. The batches accepted before the failure are stored.
// A batch too large for the room left is refused up front without failing the queue.
func TestDurableQueueFullVolumeRecovers(t *testing.T) {
	vol := smallVolume(t, 8<<20)
	cfg := localConfig("")
	cfg.Audit.Queue.Dir = filepath.Join(vol, "queue")
	app, servers := startConfig(t, cfg)
	defer app.RequireStop()
	auditAddr, apiAddr := servers.AuditAddr(), servers.APIAddr()

	postRollout(t, auditAddr)
	waitCaughtUp(t, apiAddr)
	code, h := getHealthz(t, apiAddr)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "durable: ok", h.Queue)

	batches, err := os.ReadFile(filepath.Join("testdata", "rollout", "webhook-batches.jsonl"))
	require.NoError(t, err)
	first, _, _ := bytes.Cut(batches, []byte("\n"))
	// A new batch each time (new audit IDs): a body posted again is answered from memory.
	n := 0
	fresh := func() []byte {
		n++
		return bytes.ReplaceAll(first, []byte(`"auditID":"`), []byte(`"auditID":"r`+strconv.Itoa(n)+`-`))
	}

	// A batch larger than the room left is refused before it is written: 503, and the queue
	// stays healthy for the batches that fit.
	filler := fill(t, vol)
	st, err := os.Stat(filler)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filler, st.Size()-2<<20))
	code, retry, msg := postBatch(t, auditAddr, bigBatch(3<<20))
	require.Equal(t, http.StatusServiceUnavailable, code, msg)
	assert.NotEmpty(t, retry)
	assert.Contains(t, msg, "disk full")
	code, h = getHealthz(t, apiAddr)
	require.Equal(t, http.StatusOK, code, "a batch refused for its size does not fail the queue")
	assert.Equal(t, "durable: ok", h.Queue)
	code, _, msg = postBatch(t, auditAddr, fresh())
	require.Equal(t, http.StatusOK, code, msg)

	// The volume full: the write fails, the queue is unavailable until space is back.
	filler = fill(t, vol)
	code, retry, msg = postBatch(t, auditAddr, fresh())
	require.Equal(t, http.StatusServiceUnavailable, code, msg)
	assert.NotEmpty(t, retry, "kube-apiserver retries a 503 only with Retry-After")
	assert.Contains(t, msg, "no space left on device")

	code, h = getHealthz(t, apiAddr)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unavailable", h.Status)
	assert.Contains(t, h.Queue, "durable: ")
	assert.Contains(t, h.Reason, "no space left on device")
	// /readyz names the check that fails, and only that one.
	code, body := get(t, "http://"+apiAddr+"/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "[-]audit-queue failed: audit queue unavailable")
	assert.Contains(t, body, "no space left on device")
	assert.Contains(t, body, "[+]sinks ok")
	code, _ = get(t, "http://"+apiAddr+"/readyz/sinks")
	assert.Equal(t, http.StatusOK, code)

	// Still full when the failed log probes again (at most once a second, when a batch comes):
	// every batch until that probe has failed is refused, with the reason.
	failures := metricValue(t, apiAddr, "kelemetry_audit_queue_log_failures")
	require.Positive(t, failures, "the failed write is counted")
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, apiAddr, "kelemetry_audit_queue_log_failures") == failures {
		require.True(t, time.Now().Before(deadline), "no probe of the failed log")
		code, retry, msg = postBatch(t, auditAddr, fresh())
		require.Equal(t, http.StatusServiceUnavailable, code, msg)
		assert.NotEmpty(t, retry)
		time.Sleep(20 * time.Millisecond) // the poll interval
	}
	code, retry, msg = postBatch(t, auditAddr, fresh())
	require.Equal(t, http.StatusServiceUnavailable, code, msg)
	assert.NotEmpty(t, retry)

	// Space is back: healthy again by itself, and batches are taken.
	require.NoError(t, os.Remove(filler))
	require.Eventually(t, func() bool {
		code, h := getHealthz(t, apiAddr)
		return code == http.StatusOK && h.Queue == "durable: ok"
	}, 10*time.Second, 100*time.Millisecond)
	code, body = get(t, "http://"+apiAddr+"/readyz?verbose")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "[+]audit-queue ok")
	code, _, msg = postBatch(t, auditAddr, fresh())
	require.Equal(t, http.StatusOK, code, msg)
	waitCaughtUp(t, apiAddr)
	assert.True(t, demoTraceFound(t, apiAddr), "what was accepted before the failure is stored")
}

// A second all-in-one given the same queue folder refuses to start, with one line naming the
// folder and the process that holds it.
func TestDurableQueueFolderTakenRefusesStart(t *testing.T) {
	cfg := localConfig("")
	cfg.Audit.Queue.Dir = t.TempDir()
	app, _ := startConfig(t, cfg)
	defer app.RequireStop()

	second := fx.New(kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.NopLogger)
	err := second.Err()
	if err == nil {
		err = second.Start(context.Background())
		_ = second.Stop(context.Background())
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit queue folder "+cfg.Audit.Queue.Dir+" is in use by process "+strconv.Itoa(os.Getpid()))
}

// startConfig starts an all-in-one with cfg.
func startConfig(t *testing.T, cfg kelemetry.Config) (*fxtest.App, *httpserver.Servers) {
	t.Helper()
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, quietLogger()), fx.Populate(&servers), fx.NopLogger)
	app.RequireStart()
	return app, servers
}
