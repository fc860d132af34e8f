package e2e_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/jaegerproc"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// startKelemetry starts an all-in-one named name with extra flags, stopped when the test ends.
func startKelemetry(t *testing.T, name string, args ...string) *cluster.AllInOne {
	t.Helper()
	return startKelemetryOpts(t, name, cluster.AllInOneOptions{ExtraArgs: args})
}

// startKelemetryOpts starts an all-in-one named name with opts, by default of cluster
// rolloutCluster and logging to a fresh name.log, and stops it when the test ends, showing the
// tail of its log when the test failed. The test stops a process started again itself.
func startKelemetryOpts(t *testing.T, name string, opts cluster.AllInOneOptions) *cluster.AllInOne {
	t.Helper()
	if opts.BinDir == "" {
		binDir, err := bins.Dir()
		if err != nil {
			t.Fatal(err)
		}
		opts.BinDir = binDir
	}
	if opts.Cluster == "" {
		opts.Cluster = rolloutCluster
	}
	if opts.LogFile == "" {
		opts.LogFile = filepath.Join(t.TempDir(), name+".log")
	}
	aio, err := cluster.StartAllInOne(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = aio.Stop()
		if t.Failed() {
			t.Logf("%s log %s:\n%s", name, aio.LogFile, tail(aio.LogFile, 6000))
		}
	})
	return aio
}

// waitCaughtUp waits until aio has handled every audit event it accepted and finished every link
// job: GET /healthz with the replays done, queueDepth 0 and linkJobs 0.
func waitCaughtUp(t *testing.T, aio *cluster.AllInOne) {
	t.Helper()
	api := kapi.New(aio.URL)
	eventually(t, kelemetryTimeout, "the all-in-one at "+aio.URL+" caught up", func(ctx context.Context) error {
		h, err := api.Health(ctx)
		if err != nil {
			return err
		}
		if !h.Replay.Done || h.QueueDepth != 0 || h.LinkJobs != 0 {
			return fmt.Errorf("replay done %v, %d events queued, %d link jobs", h.Replay.Done, h.QueueDepth, h.LinkJobs)
		}
		return nil
	})
}

// rolloutReplayArgs are the all-in-one flags replaying the recorded rollout: its audit log and
// its core/v1 Events, by absolute path.
func rolloutReplayArgs(t *testing.T) []string {
	t.Helper()
	audit, err := filepath.Abs(filepath.Join(rolloutDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := filepath.Abs(filepath.Join(rolloutDir, "events-core-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--replay=" + audit, "--replay-events=" + events}
}

// jaegerStoreArgs are the flags of a replica on the jaeger store backend of jb.
func jaegerStoreArgs(jb *jaegerproc.Jaeger, role string) []string {
	args := []string{"--role=" + role, "--store-backend=jaeger", "--jaeger-endpoint=" + jb.RemoteStorageAddr}
	if role != "query" {
		args = append(args, "--jaeger-otlp-endpoint=grpc://"+jb.OTLPAddr)
	}
	return args
}

// webhookBatches reads the recorded rollout's webhook batches (one JSON EventList a line).
func webhookBatches(t *testing.T) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rolloutDir, "webhook-batches.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for line := range bytes.Lines(data) {
		out = append(out, bytes.Clone(line))
	}
	return out
}

// postBatch posts one batch to a webhook URL and returns the status code (0: no connection).
func postBatch(ctx context.Context, url string, batch []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(batch))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// postAccepted posts one batch until the webhook accepts it, retrying on 429 as kube-apiserver's
// webhook does; it returns the number of 429 answers.
func postAccepted(ctx context.Context, t *testing.T, url string, batch []byte) int {
	t.Helper()
	for attempt := 0; ; attempt++ {
		code := postBatch(ctx, url, batch)
		if code == http.StatusOK {
			return attempt
		}
		if code != http.StatusTooManyRequests || attempt > 300 {
			t.Fatalf("batch to %s: %d after %d attempts", url, code, attempt)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rolloutQuery finds the rollout's Deployment with every related object.
func rolloutQuery(t *testing.T) jaegerproc.TraceQuery {
	from, to := rolloutRange(t)
	return jaegerproc.TraceQuery{Service: "tracing [full tree]", Tags: map[string]string{"resource": "deployments", "name": "demo"},
		Start: from.Add(-time.Hour).Truncate(time.Second), End: to.Add(time.Hour).Truncate(time.Second), Limit: 10}
}

// sameMergedTree compares two processes' answers for the rollout: the same display ID and the
// same spans (ID, parent, operation, tags, logs). Diffs and deletion snapshots are left out: each
// ingest replica diffs an object's writes against the versions it saw itself.
func sameMergedTree(got, want []kapi.Trace) error {
	if len(got) != 1 || len(want) != 1 {
		return fmt.Errorf("%d results, want %d (1)", len(got), len(want))
	}
	g, w := got[0], want[0]
	if g.TraceID != w.TraceID {
		return fmt.Errorf("display ID %s, want %s", g.TraceID, w.TraceID)
	}
	lines := func(tr kapi.Trace) []string {
		var out []string
		for _, s := range tr.Spans {
			line := fmt.Sprintf("%s %s <- %s", s.SpanID, s.OperationName, parent(s))
			for _, kv := range s.Tags {
				line += fmt.Sprintf(" %s=%v", kv.Key, kv.Value)
			}
			for _, l := range s.Logs {
				var fields []string
				for _, f := range l.Fields {
					if f.Key != "snapshot" && !strings.HasSuffix(f.Key, "diff") && f.Key != "diff note" {
						fields = append(fields, fmt.Sprintf("%s=%v", f.Key, f.Value))
					}
				}
				sort.Strings(fields)
				line += fmt.Sprintf(" | %d %s", l.Timestamp, strings.Join(fields, " "))
			}
			out = append(out, line)
		}
		sort.Strings(out)
		return out
	}
	gl, wl := lines(g), lines(w)
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			return fmt.Errorf("%d spans, want %d; missing or different: %.300s", len(gl), len(wl), l)
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			return fmt.Errorf("%d spans, want %d; extra or different: %.300s", len(gl), len(wl), l)
		}
	}
	return nil
}

// TestJaegerReplicas runs Kelemetry as several replicas on one Jaeger (its memory backend, read
// through remote_storage): two ingest replicas each receive half of the recorded webhook batches
// (alternating, as a Service spreads kube-apiserver's requests), and one of them is stopped in
// the middle of the stream, as a rolling update does: the batches it no longer accepts are sent
// to the other. A query replica that never ingested anything then answers the same merged tree
// as a single all-in-one given every batch: no event missing, none doubled.
func TestJaegerReplicas(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	jb := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeBackend})
	single := startKelemetry(t, "single")
	a := startKelemetry(t, "ingest-a", jaegerStoreArgs(jb, "ingest")...)
	b := startKelemetry(t, "ingest-b", jaegerStoreArgs(jb, "ingest")...)
	query := startKelemetry(t, "query", jaegerStoreArgs(jb, "query")...)

	batches := webhookBatches(t)
	resent := 0
	for i, batch := range batches {
		if code := postBatch(ctx, single.AuditURL, batch); code != http.StatusOK {
			t.Fatalf("batch %d to the single all-in-one: %d", i, code)
		}
		if i == len(batches)/2 {
			if err := a.Stop(); err != nil { // SIGTERM: it drains what it accepted, then exits
				t.Fatal(err)
			}
		}
		target := []string{a.AuditURL, b.AuditURL}[i%2]
		if code := postBatch(ctx, target, batch); code != http.StatusOK {
			resent++
			if code := postBatch(ctx, b.AuditURL, batch); code != http.StatusOK {
				t.Fatalf("batch %d re-sent to replica b: %d", i, code)
			}
		}
	}
	if resent == 0 {
		t.Fatal("no batch was refused by the stopped replica")
	}

	waitCaughtUp(t, single)
	want, err := jaegerproc.NewClient(single.URL).FindTraces(ctx, rolloutQuery(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 1 || len(want[0].Spans) < 10 {
		t.Fatalf("the single all-in-one's tree: %d results", len(want))
	}
	qc := jaegerproc.NewClient(query.URL)
	eventually(t, kelemetryTimeout, "the query replica's tree equals the single all-in-one's", func(ctx context.Context) error {
		got, err := qc.FindTraces(ctx, rolloutQuery(t))
		if err != nil {
			return err
		}
		return sameMergedTree(got, want)
	})
	// The clusters, from the markers the ingest replicas wrote.
	ops, err := qc.Operations(ctx, "tracing")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ops, rolloutCluster) {
		t.Errorf("the query replica's clusters: %v, want %s", ops, rolloutCluster)
	}
	// The display ID resolves on the query replica: computed trace IDs, no prefix scan.
	tr, err := qc.Trace(ctx, want[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameMergedTree([]kapi.Trace{tr}, want); err != nil {
		t.Errorf("the query replica's /api/traces/{id}: %v", err)
	}
	// The change feed: the query replica searches Jaeger for it, the single all-in-one reads its
	// index; both list the same writes.
	feed := func(base string) ([]string, error) {
		from, _ := rolloutRange(t)
		q := url.Values{"since": {from.Add(-time.Hour).Format(time.RFC3339)}, "limit": {"5000"}}
		resp, err := http.Get(base + "/api/changes?" + q.Encode())
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var page struct {
			Data []struct{ AuditID, SpanID, Verb string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			return nil, fmt.Errorf("%s: %w", resp.Status, err)
		}
		var out []string
		for _, c := range page.Data {
			out = append(out, c.AuditID+" "+c.SpanID+" "+c.Verb)
		}
		slices.Sort(out)
		return out, nil
	}
	wantFeed, err := feed(single.URL)
	if err != nil {
		t.Fatal(err)
	}
	gotFeed, err := feed(query.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(wantFeed) < 100 || !slices.Equal(gotFeed, wantFeed) {
		t.Errorf("the change feed over Jaeger: %d changes, the all-in-one's: %d", len(gotFeed), len(wantFeed))
	}
	logTimings(t, start, "batches", len(batches), "re-sent", resent, "spans", len(want[0].Spans), "changes", len(gotFeed))
}

// TestJaegerOutageDuringIngest stops Jaeger (on Badger, so that what it stored survives) for 10
// seconds while an ingest replica receives the rollout: the replica's OTLP queue fills and its
// webhook answers 429 (kube-apiserver retries such a batch; here the test does), a query replica
// answers a clear 503 meanwhile, and once Jaeger is back nothing is lost: the query replica's
// tree equals a single all-in-one's.
func TestJaegerOutageDuringIngest(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	work := t.TempDir()
	jb := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeBackend, BadgerDir: filepath.Join(work, "badger")})
	// A small OTLP queue, so that the outage fills it within the recording.
	cfg := filepath.Join(work, "ingest.yaml")
	yaml := fmt.Sprintf("role: ingest\nstoreBackend: jaeger\njaeger:\n  endpoint: %s\n  otlp:\n    endpoint: grpc://%s\n    queueSize: 60\n    enqueueTimeout: 100ms\n    retryBackoff: 200ms\n",
		jb.RemoteStorageAddr, jb.OTLPAddr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	single := startKelemetry(t, "single")
	ingest := startKelemetry(t, "ingest", "--config="+cfg)
	query := startKelemetry(t, "query", jaegerStoreArgs(jb, "query")...)
	qc := jaegerproc.NewClient(query.URL)

	batches := webhookBatches(t)
	half := len(batches) / 3
	for i, batch := range batches[:half] {
		if code := postBatch(ctx, single.AuditURL, batch); code != http.StatusOK {
			t.Fatalf("batch %d to the single all-in-one: %d", i, code)
		}
		postAccepted(ctx, t, ingest.AuditURL, batch)
	}
	eventually(t, kelemetryTimeout, "the first batches through Jaeger", func(ctx context.Context) error {
		got, err := qc.FindTraces(ctx, rolloutQuery(t))
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("%d results", len(got))
		}
		return nil
	})

	if err := jb.Stop(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// Queries answer a clear error at once.
	_, err := qc.FindTraces(ctx, rolloutQuery(t))
	var he *jaegerproc.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || !strings.Contains(he.Error(), "unavailable") {
		t.Errorf("query while Jaeger is down: %v, want a 503 saying the store is unavailable", err)
	}
	if d := time.Since(down); d > 15*time.Second {
		t.Errorf("the failed query took %s", d)
	}
	// The rest of the rollout: retried on 429 as kube-apiserver's webhook does, while Jaeger
	// comes back after 10 seconds.
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(10*time.Second - time.Since(down))
		restarted <- jb.StartAgain(context.Background())
	}()
	tooMany := 0
	for i, batch := range batches[half:] {
		if code := postBatch(ctx, single.AuditURL, batch); code != http.StatusOK {
			t.Fatalf("batch %d to the single all-in-one: %d", half+i, code)
		}
		tooMany += postAccepted(ctx, t, ingest.AuditURL, batch)
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if tooMany == 0 {
		t.Error("the webhook never answered 429 while Jaeger was down")
	}

	waitCaughtUp(t, single)
	want, err := jaegerproc.NewClient(single.URL).FindTraces(ctx, rolloutQuery(t))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*kelemetryTimeout, "every span in Jaeger after the outage", func(ctx context.Context) error {
		got, err := qc.FindTraces(ctx, rolloutQuery(t))
		if err != nil {
			return err
		}
		return sameMergedTree(got, want)
	})
	logTimings(t, start, "batches", len(batches), "429 answers", tooMany, "spans", len(want[0].Spans))
}

// serviceProxy stands for a Kubernetes Service in front of ingest replicas: it serves the
// webhook address kube-apiserver posts to (over the same TLS, requiring its client certificate)
// and sends each batch to the next replica in turn, or to another when that one fails.
type serviceProxy struct {
	srv      *http.Server
	replicas []string // webhook URLs
	next     atomic.Int64
	counts   []atomic.Int64
}

func startServiceProxy(t *testing.T, addr string, tlsFiles *cluster.WebhookTLS, replicas ...string) *serviceProxy {
	t.Helper()
	p := &serviceProxy{replicas: replicas, counts: make([]atomic.Int64, len(replicas))}
	ca, err := os.ReadFile(tlsFiles.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(tlsFiles.CertFile, tlsFiles.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	for range 100 { // the stopped all-in-one's port may take a moment to be free
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.forward),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = p.srv.ServeTLS(lis, "", "") }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *serviceProxy) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	first := int(p.next.Add(1)) % len(p.replicas)
	code := 0
	for i := range p.replicas {
		n := (first + i) % len(p.replicas)
		if code = postBatch(r.Context(), p.replicas[n], body); code == http.StatusOK {
			p.counts[n].Add(1)
			break
		}
	}
	if code == 0 {
		code = http.StatusBadGateway
	}
	w.WriteHeader(code)
}

// TestJaegerReplicasOnControlPlane puts two ingest replicas on one Jaeger behind a stand-in for a
// Service, in place of the shared environment's all-in-one, while the real control plane rolls a
// Deployment out and scales it: kube-apiserver's batches spread over both replicas, and a query
// replica that ingested nothing shows the Deployment with its ReplicaSet and every Pod in one
// tree.
func TestJaegerReplicasOnControlPlane(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	aio := env.Kelemetry
	if aio.AuditTLS == nil {
		t.Skip("the environment's webhook is not served over TLS")
	}
	u, err := url.Parse(aio.AuditURL)
	if err != nil {
		t.Fatal(err)
	}
	clusterName := path.Base(u.Path)
	jb := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeBackend})
	replica := func(name, role string) *cluster.AllInOne {
		args := append(jaegerStoreArgs(jb, role), "--event-watch=false", "--diff-informer=false", "--link-rules-watch=false")
		return startKelemetryOpts(t, name, cluster.AllInOneOptions{Cluster: clusterName, Kubeconfig: env.Cluster.Kubeconfig, ExtraArgs: args})
	}
	a, b := replica("ingest-a", "ingest"), replica("ingest-b", "ingest")
	query := replica("query", "query")

	// The environment's all-in-one makes way for the replicas, and comes back afterwards.
	if err := env.StopKelemetry(); err != nil {
		t.Fatal(err)
	}
	proxy := startServiceProxy(t, u.Host, aio.AuditTLS, a.AuditURL, b.AuditURL)
	t.Cleanup(func() {
		_ = proxy.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.StartKelemetry(ctx); err != nil {
			t.Errorf("start the environment's all-in-one again: %v", err)
		}
	})

	ns := newNamespace(t, "replicas")
	s := session(t, ns)
	const name = "spread"
	if err := s.CreateDeployment(ctx, name, "alpine:3.16", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitRolledOut(ctx, name, 2); err != nil {
		t.Fatal(err)
	}
	// Scale on until kube-apiserver's batches (one a second) have reached both replicas.
	replicas := int32(2)
	var pods []string
	for i := 0; i < 2 || proxy.counts[0].Load() == 0 || proxy.counts[1].Load() == 0; i++ {
		if i == 20 {
			t.Fatalf("batches per replica: %d and %d after 20 scale-ups", proxy.counts[0].Load(), proxy.counts[1].Load())
		}
		replicas++
		if err := s.Scale(ctx, name, replicas); err != nil {
			t.Fatal(err)
		}
		if pods, err = s.WaitRolledOut(ctx, name, replicas); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	qc := jaegerproc.NewClient(query.URL)
	eventually(t, kelemetryTimeout, "the Deployment's tree on the query replica", func(ctx context.Context) error {
		found, err := qc.FindTraces(ctx, jaegerproc.TraceQuery{Service: "tracing [full tree]", Operation: clusterName,
			Tags: map[string]string{"resource": "deployments", "namespace": ns, "name": name}, Start: start.Add(-time.Minute), End: time.Now().Add(time.Minute)})
		if err != nil {
			return err
		}
		if len(found) != 1 {
			return fmt.Errorf("%d results", len(found))
		}
		counts := objectCounts(found[0])
		var names []string
		for _, sp := range found[0].Spans {
			if sp.Kind() == kapi.KindObject && sp.Tag("resource") == "pods" {
				names = append(names, sp.Tag("name"))
			}
		}
		if counts["deployments"] != 1 || counts["replicasets"] != 1 {
			return fmt.Errorf("objects %v", counts)
		}
		return containsAll(names, pods)
	})
	logTimings(t, start, "batches to a", proxy.counts[0].Load(), "batches to b", proxy.counts[1].Load(), "pods", len(pods))
}
