//go:build e2e

package natse2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/audit/consumer"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
	"github.com/kelemetry/kelemetry/internal/healthz"
	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/storageapi/storagev2"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/jaeger"
	"github.com/kelemetry/kelemetry/telemetry"
)

const testCluster = "natse2e"

// freePort returns a loopback port that was free a moment ago.
var freePort = natstest.FreePort

// waitStreams waits until the streams and the partition consumers answer (their leaders are
// elected), e.g. after the nodes restarted.
func waitStreams(t *testing.T, nodes []*natstest.Node) {
	t.Helper()
	require.Eventually(t, func() bool {
		nc, err := nats.Connect(strings.Join(natstest.URLs(nodes), ","), nats.Timeout(time.Second))
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for _, name := range []string{"KELEMETRY_AUDIT", "KELEMETRY_AUDIT_HISTORY", "KELEMETRY_AUDIT_DEAD"} {
			if _, err := js.Stream(ctx, name); err != nil {
				return false
			}
		}
		for p := range 8 {
			if _, err := js.Consumer(ctx, "KELEMETRY_AUDIT", fmt.Sprintf("KELEMETRY_AUDIT_p%d", p)); err != nil {
				return false
			}
		}
		return true
	}, 2*time.Minute, 500*time.Millisecond, "streams and consumers ready")
}

// streamEmpty reports whether the audit stream holds no message: every message was handled
// and acknowledged (the stream is a work queue).
func streamEmpty(t *testing.T, nodes []*natstest.Node) bool {
	nc, err := nats.Connect(strings.Join(natstest.URLs(nodes), ","), nats.Timeout(time.Second))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KELEMETRY_AUDIT")
	if err != nil {
		return false
	}
	return s.CachedInfo().State.Msgs == 0
}

// jaegerProc is the real Jaeger (memory backend) the replicas write to.
type jaegerProc struct {
	otlp, remote string
}

func startJaeger(t *testing.T) jaegerProc {
	t.Helper()
	dir := os.Getenv("KELEMETRY_E2E_CACHE")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "kelemetry-e2e", "bin")
	}
	bin := filepath.Join(dir, "jaeger")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("KELEMETRY_E2E_REQUIRE") == "1" {
			t.Fatalf("no Jaeger binary: %v", err)
		}
		t.Skipf("no Jaeger binary (%v): run ./scripts/e2e.sh once", err)
	}
	health, remote, otlp, metrics := freePort(t), freePort(t), freePort(t), freePort(t)
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "testdata", "jaeger", "memory-backend.yaml"))
	require.NoError(t, err)
	r := strings.NewReplacer("{HEALTH}", fmt.Sprint(health), "{REMOTE}", fmt.Sprint(remote), "{OTLP}", fmt.Sprint(otlp), "{METRICS}", fmt.Sprint(metrics))
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "jaeger.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(r.Replace(string(tmpl))), 0o600))
	logf, err := os.Create(filepath.Join(tmp, "jaeger.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_SAMPLER=always_off")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logf.Close()
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/status", health))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "Jaeger does not come up")
	return jaegerProc{otlp: fmt.Sprintf("127.0.0.1:%d", otlp), remote: fmt.Sprintf("127.0.0.1:%d", remote)}
}

// buildAllInOne builds the all-in-one binary (KELEMETRY_ALLINONE_BIN overrides).
func buildAllInOne(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("KELEMETRY_ALLINONE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "allinone")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kelemetry").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// replica is one all-in-one process with role ingest on the NATS queue.
type replica struct {
	name     string
	cmd      *exec.Cmd
	auditURL string
	apiURL   string
	exited   chan struct{}
}

// replicaConfig is the YAML configuration of the replicas: the NATS queue (R3, 8 partitions,
// a short pinnedTTL so that takeovers are quick), the jaeger store backend.
func replicaConfig(t *testing.T, nodes []*natstest.Node, j jaegerProc) string {
	t.Helper()
	cfg := fmt.Sprintf(`role: ingest
storeBackend: jaeger
jaeger:
  endpoint: %q
  otlp: {endpoint: %q}
audit:
  queue:
    nats:
      urls: [%s]
      replicas: 3
      partitions: 8
      pinnedTTL: 2s
      ackWait: 5s
      maxInFlight: 1
      publishTimeout: 3s
      connectTimeout: 1s
`, j.remote, j.otlp, `"`+strings.Join(natstest.URLs(nodes), `", "`)+`"`)
	p := filepath.Join(t.TempDir(), "replica.yaml")
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o600))
	return p
}

// startReplica starts a replica; one that exits before it is healthy (its start timed out
// while the NATS cluster elects stream leaders after a restart) is started again, 3 times at most.
func startReplica(t *testing.T, bin, cfgFile, name string) *replica {
	t.Helper()
	for attempt := 1; ; attempt++ {
		r := startReplicaOnce(t, bin, cfgFile, name)
		ok := false
		deadline := time.Now().Add(60 * time.Second)
		for !ok && time.Now().Before(deadline) {
			select {
			case <-r.exited:
				deadline = time.Now()
			case <-time.After(100 * time.Millisecond):
				if resp, err := http.Get(r.apiURL + "/healthz"); err == nil {
					resp.Body.Close()
					ok = resp.StatusCode == http.StatusOK
				}
			}
		}
		if ok {
			return r
		}
		require.Less(t, attempt, 3, "replica %s does not come up", name)
		_ = r.cmd.Process.Kill()
		<-r.exited
		t.Logf("replica %s did not come up (attempt %d), starting it again", name, attempt)
	}
}

func startReplicaOnce(t *testing.T, bin, cfgFile, name string) *replica {
	t.Helper()
	auditAddr, apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config="+cfgFile, "--cluster="+testCluster, "--data-dir=",
		"--audit-addr="+auditAddr, "--http-addr="+apiAddr, "--log-level=warn")
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, io.MultiWriter(logf, prefixWriter{name})
	require.NoError(t, cmd.Start())
	r := &replica{name: name, cmd: cmd, auditURL: "http://" + auditAddr + "/audit/" + testCluster,
		apiURL: "http://" + apiAddr, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.exited
	})
	return r
}

// kill9 kills the replica with SIGKILL and waits for it.
func (r *replica) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
	<-r.exited
}

// stop stops the replica with SIGTERM and waits for it.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s does not stop", r.name)
	}
}

// prefixWriter writes a process's stderr to the test's stderr, each line prefixed.
type prefixWriter struct{ name string }

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(os.Stderr, "[%s] %s\n", w.name, line)
	}
	return len(b), nil
}

// batches are the recorded webhook batches (testdata/bulk).
func readBatches(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "bulk", "webhook-batches.jsonl.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out [][]byte
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// poster posts batches one at a time, in order (so that each object's events reach the
// stream in the order of the recording), to the live replicas in turn, retrying a batch on the
// next replica when one refuses it (429, 503) or is gone, as kube-apiserver behind a Service.
type poster struct {
	mu       sync.Mutex
	replicas []*replica
	next     int
	client   *http.Client
	retries  int
}

func newPoster(rs ...*replica) *poster {
	return &poster{replicas: rs, client: &http.Client{Timeout: 30 * time.Second}}
}

func (p *poster) set(rs ...*replica) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replicas = rs
}

func (p *poster) post(t *testing.T, batches [][]byte) {
	t.Helper()
	for i, b := range batches {
		deadline := time.Now().Add(90 * time.Second)
		for {
			p.mu.Lock()
			r := p.replicas[p.next%len(p.replicas)]
			p.next++
			p.mu.Unlock()
			resp, err := p.client.Post(r.auditURL, "application/json", bytes.NewReader(b))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				require.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, resp.StatusCode, "batch %d", i)
			}
			p.retries++
			require.True(t, time.Now().Before(deadline), "batch %d not accepted for 90s (last: %v)", i, err)
			time.Sleep(100 * time.Millisecond) // the client's back-off on 429/503, as kube-apiserver's (not a wait)
		}
	}
}

// expected is what one replica handling every event in order gives: per audit ID, the diff
// logs of its event span.
func expected(t *testing.T, batches [][]byte) map[string][]string {
	t.Helper()
	agg := &aggregatortest.RecordingAggregator{}
	c, err := consumer.New(kelemetry.Config{}.WithDefaults().Audit.Consumer, consumer.Deps{Aggregator: agg})
	require.NoError(t, err)
	ctx := context.Background()
	for _, b := range batches {
		evs, err := auditv1.DecodeEventList(bytes.Clone(b))
		require.NoError(t, err)
		for _, ev := range evs {
			c.Handle(ctx, testCluster, ev)
		}
	}
	out := map[string][]string{}
	for _, ev := range agg.Events() {
		id, _ := ev.Attributes.Get(aggregator.AttrAuditID)
		if id == "" {
			id = ev.ID
		}
		out[id] = diffLogs(ev.Logs)
	}
	require.NotEmpty(t, out)
	return out
}

// diffLogs returns the messages of the diff logs (changes and notes), in order.
func diffLogs(logs []aggregator.Log) []string {
	out := []string{}
	for _, l := range logs {
		if l.Type == aggregator.LogTypeDiff {
			out = append(out, l.Message)
		}
	}
	return out
}

// stored reads every trace back from Jaeger: per audit ID, the diff logs of its event span, and
// how many copies of each event span Jaeger holds (a message handled twice would write a second
// copy, which the reader drops).
type stored struct {
	diffs  map[string][]string
	copies map[string]int // event span ID -> raw copies of it in Jaeger
}

func readStored(t *testing.T, j jaegerProc) stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := jaeger.Open(ctx, jaeger.Config{Endpoint: j.remote, CacheTTL: time.Nanosecond, SearchDepth: 500_000}, 0, telemetry.Settings{})
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
	out := stored{diffs: map[string][]string{}, copies: map[string]int{}}
	for _, tr := range traces {
		for _, sp := range tr {
			if sp.Kind != aggregator.KindEvent {
				continue
			}
			id, _ := sp.Attributes.Get(aggregator.AttrAuditID)
			out.diffs[id] = diffLogs(sp.Logs)
		}
	}
	// Raw copies, straight from Jaeger's storage API.
	conn, err := grpc.NewClient(j.remote, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	require.NoError(t, err)
	defer conn.Close()
	client := storagev2.NewTraceReaderClient(conn)
	for i := 0; i < len(ws); i += 100 {
		req := &storagev2.GetTracesRequest{}
		for _, w := range ws[i:min(i+100, len(ws))] {
			req.Query = append(req.Query, &storagev2.GetTraceParams{TraceId: w.TraceID[:],
				StartTime: timestamppb.New(w.Window), EndTime: timestamppb.New(w.Window.Add(aggregator.DefaultWindow))})
		}
		stream, err := client.GetTraces(ctx, req)
		require.NoError(t, err)
		for {
			td, err := stream.Recv()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			countAuditSpans(td, out.copies)
		}
	}
	return out
}

func countAuditSpans(td *tracev1.TracesData, copies map[string]int) {
	for _, rs := range td.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				for _, a := range sp.GetAttributes() {
					if a.GetKey() == aggregator.AttrAuditID {
						copies[hex.EncodeToString(sp.GetSpanId())]++
						break
					}
				}
			}
		}
	}
}

// readSettled reads Jaeger until every expected event is there or nothing new arrived for
// 20s: the replicas acknowledge a message once the sinks accepted its spans, and the OTLP
// exporter sends them to Jaeger a moment later.
func readSettled(t *testing.T, j jaegerProc, want map[string][]string) stored {
	t.Helper()
	var got stored
	last, since := -1, time.Now()
	for {
		got = readStored(t, j)
		missing := 0
		for id := range want {
			if _, ok := got.diffs[id]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Since(since) > 20*time.Second {
			return got
		}
		if missing != last {
			last, since = missing, time.Now()
		}
		time.Sleep(time.Second) // the poll interval (reading Jaeger is not cheap)
	}
}

// check compares what Jaeger holds with what one replica handling everything in order gives:
// every event stored (nothing lost), one copy each (nothing doubled), and the same diffs
// (continuous across takeovers: each update compares against the previous version).
func check(t *testing.T, want map[string][]string, got stored) {
	t.Helper()
	var lost, doubled, diffMismatch, unavailable int
	for id, d := range want {
		g, ok := got.diffs[id]
		if !ok {
			lost++
			continue
		}
		if !equal(d, g) {
			diffMismatch++
			if diffMismatch <= 5 {
				t.Logf("audit ID %s: diff %q, want %q", id, g, d)
			}
			for _, m := range g {
				if strings.Contains(m, "no previous version seen") {
					unavailable++
				}
			}
		}
	}
	for _, n := range got.copies {
		if n > 1 {
			doubled++
		}
	}
	t.Logf("%d events expected: %d lost, %d stored twice, %d with other diffs (%d of them 'no previous version')",
		len(want), lost, doubled, diffMismatch, unavailable)
	require.Zero(t, lost, "events lost")
	require.Zero(t, doubled, "events stored twice")
	require.Zero(t, diffMismatch, "events whose diffs differ from a single replica's")
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitIdle waits until the stream is empty and the spans stopped arriving in Jaeger.
func waitIdle(t *testing.T, nodes []*natstest.Node, rs ...*replica) {
	t.Helper()
	require.Eventually(t, func() bool { return streamEmpty(t, nodes) }, 3*time.Minute, 200*time.Millisecond, "stream drained")
	require.Eventually(t, func() bool {
		for _, r := range rs {
			resp, err := http.Get(r.apiURL + "/healthz")
			if err != nil {
				return false
			}
			var h healthz.Body
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if err != nil || h.QueueDepth != 0 || h.LinkJobs != 0 {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "replicas idle")
}

// logQueueMetrics logs the queue's takeover and redelivery counters of the live replicas, to
// tell what a failing check saw.
func logQueueMetrics(t *testing.T, rs ...*replica) {
	t.Helper()
	for _, r := range rs {
		resp, err := http.Get(r.apiURL + "/metrics")
		if err != nil {
			t.Logf("replica %s: metrics: %v", r.name, err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			for _, m := range []string{"kelemetry_natsqueue_warm_takeovers", "kelemetry_natsqueue_history_lagged",
				"kelemetry_natsqueue_committed_redeliveries", "kelemetry_natsqueue_stored_redeliveries",
				"kelemetry_natsqueue_stored_check_failures", "kelemetry_natsqueue_redelivered", "kelemetry_natsqueue_partitions_released",
				"kelemetry_natsqueue_commit_marker_failures", "kelemetry_natsqueue_dead_lettered", "kelemetry_natsqueue_history_copied"} {
				if strings.HasPrefix(l, m) {
					lines = append(lines, l)
				}
			}
		}
		t.Logf("replica %s:\n  %s", r.name, strings.Join(lines, "\n  "))
	}
}
