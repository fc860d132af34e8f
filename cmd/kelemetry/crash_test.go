package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// process is the all-in-one binary running with a data folder.
type process struct {
	cmd      *exec.Cmd
	auditURL string
	apiURL   string
	dataDir  string
	exited   chan struct{}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "allinone")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

func startProcess(t *testing.T, bin, dataDir string, args ...string) *process {
	t.Helper()
	auditAddr, apiAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, append([]string{"--cluster=crash", "--data-dir=" + dataDir,
		"--audit-addr=" + auditAddr, "--http-addr=" + apiAddr, "--log-level=warn", keepFixtures}, args...)...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, auditURL: "http://" + auditAddr + "/audit/crash", apiURL: "http://" + apiAddr,
		dataDir: dataDir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(p.apiURL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond, "the all-in-one does not come up")
	return p
}

// idle reports whether the process holds no audit event: nothing queued in memory and only the
// active file of the durable queue's log left (older files are deleted once handled).
func (p *process) idle(t *testing.T) bool {
	t.Helper()
	resp, err := http.Get(p.apiURL + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h healthz.Body
	if json.NewDecoder(resp.Body).Decode(&h) != nil || h.QueueDepth != 0 {
		return false
	}
	segs, _ := filepath.Glob(filepath.Join(p.dataDir, "audit-queue", "*.seg"))
	return len(segs) <= 1
}

// stop stops the process gracefully (SIGTERM) and waits for it.
func (p *process) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the all-in-one does not stop")
	}
}

type bulkBatch struct {
	body     []byte
	auditIDs []string
}

func readBulkBatches(t *testing.T) []bulkBatch {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []bulkBatch
	for sc.Scan() {
		body := bytes.Clone(sc.Bytes())
		evs, err := auditv1.DecodeEventList(bytes.Clone(body))
		require.NoError(t, err)
		b := bulkBatch{body: body}
		for _, ev := range evs {
			b.auditIDs = append(b.auditIDs, ev.AuditID)
		}
		out = append(out, b)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// postBatches posts the batches with a few concurrent senders, retrying 429 and 503 as
// kube-apiserver does, and returns the audit IDs of the batches answered 200. After killAfter
// batches were acknowledged (if positive) it kills the process (SIGKILL) and stops sending.
func postBatches(t *testing.T, p *process, batches []bulkBatch, killAfter int) map[string]bool {
	t.Helper()
	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		nAcked int
		next   atomic.Int64
		killed atomic.Bool
		wg     sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	for range 6 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) || killed.Load() {
					return
				}
				for !killed.Load() {
					resp, err := client.Post(p.auditURL, "application/json", bytes.NewReader(batches[i].body))
					if err != nil {
						if killed.Load() {
							return
						}
						t.Errorf("post batch %d: %v", i, err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
						time.Sleep(50 * time.Millisecond) // a client's back-off on 429/503 before resending, as a webhook does (not a wait)
						continue
					}
					if resp.StatusCode != http.StatusOK {
						t.Errorf("batch %d: status %d", i, resp.StatusCode)
						break
					}
					mu.Lock()
					for _, id := range batches[i].auditIDs {
						acked[id] = true
					}
					nAcked++
					if killAfter > 0 && nAcked == killAfter && killed.CompareAndSwap(false, true) {
						require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
					}
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	return acked
}

// storedEventSpans opens the store of a stopped process and returns, per audit ID, the span IDs
// of the event spans stored for it.
func storedEventSpans(t *testing.T, dataDir string) map[string]map[string]bool {
	t.Helper()
	ctx := context.Background()
	st, err := pebble.Open(ctx, pebble.Config{Dir: dataDir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	defer st.Stop(context.Background()) //nolint:errcheck // the test ends
	objs, err := st.FindObjects(ctx, store.ObjectQuery{Limit: 1 << 20})
	require.NoError(t, err)
	var ws []store.ObjectWindow
	for _, o := range objs {
		ws = append(ws, o.Windows...)
	}
	traces, err := st.GetTraces(ctx, ws)
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	for _, tr := range traces {
		for _, sp := range tr {
			if sp.Kind != aggregator.KindEvent {
				continue
			}
			id, _ := sp.Attributes.Get(aggregator.AttrAuditID)
			if out[id] == nil {
				out[id] = map[string]bool{}
			}
			out[id][sp.SpanID.String()] = true
		}
	}
	return out
}

// TestKill9KeepsAcknowledgedEvents is issue 12's test of the durable queue: the all-in-one is
// killed (SIGKILL) in the middle of a burst of webhook batches and restarted; every event it
// acknowledged with 200 is then stored, and none twice.
func TestKill9KeepsAcknowledgedEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the all-in-one binary")
	}
	var args []string
	if os.Getenv("KELEMETRY_TEST_QUEUE_DURABLE") == "false" {
		// Shows what the test catches: the in-memory queue loses acknowledged events.
		args = append(args, "--audit-queue-durable=false")
	}
	bin := buildBinary(t)
	batches := readBulkBatches(t)

	// What a run without a crash stores, per audit ID (some events are filtered out).
	refDir := t.TempDir()
	p := startProcess(t, bin, refDir, args...)
	postBatches(t, p, batches, 0)
	require.Eventually(t, func() bool { return p.idle(t) }, 60*time.Second, 100*time.Millisecond)
	p.stop(t)
	ref := storedEventSpans(t, refDir)
	require.NotEmpty(t, ref)

	dir := t.TempDir()
	p = startProcess(t, bin, dir, args...)
	acked := postBatches(t, p, batches, len(batches)/2)
	<-p.exited
	p = startProcess(t, bin, dir, args...)
	require.Eventually(t, func() bool { return p.idle(t) }, 60*time.Second, 100*time.Millisecond)
	p.stop(t)
	got := storedEventSpans(t, dir)

	var want, lost, doubled int
	for id := range acked {
		if len(ref[id]) == 0 {
			continue
		}
		want++
		if len(got[id]) == 0 {
			lost++
			if lost <= 5 {
				t.Logf("lost %s", id)
			}
		}
	}
	for id, spans := range got {
		if len(spans) > max(1, len(ref[id])) {
			doubled++
		}
	}
	t.Logf("acknowledged %d audit IDs (%d stored by a run without crash): %d lost, %d stored twice", len(acked), want, lost, doubled)
	require.NotZero(t, want)
	assert.Zero(t, lost, "acknowledged events lost")
	assert.Zero(t, doubled, "events stored twice")
}

func TestParseDurableQueueFlag(t *testing.T) {
	cfg, _, err := parseFlags([]string{"--data-dir", "d"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, cfg.WithDefaults().Audit.Queue.IsDurable(), "durable by default with a data folder")
	assert.Equal(t, filepath.Join("d", "audit-queue"), cfg.WithDefaults().Audit.Queue.Dir)

	cfg, _, err = parseFlags([]string{"--data-dir", "d", "--audit-queue-durable=false"}, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.WithDefaults().Audit.Queue.IsDurable())

	cfg, _, err = parseFlags([]string{"--data-dir", ""}, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.WithDefaults().Audit.Queue.IsDurable(), "in memory without a data folder")

	_, _, err = parseFlags([]string{"--data-dir", "", "--audit-queue-durable=true"}, io.Discard)
	require.Error(t, err, "durable needs a folder")
}
