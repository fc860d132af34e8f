package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// natsStream is the JetStream stream of the NATS audit queue (its default name).
const natsStream = "KELEMETRY_AUDIT"

// TestNATSQueueControlPlane: a real control plane's audit through the NATS JetStream audit queue
// gives the same trees as through the in-process queue. On an environment of its own (a cluster
// with one node, ~12 s to start), kube-apiserver's audit webhook feeds all-in-one A, set up as
// usual (webhook over TLS, durable local queue), which forwards every batch it accepted
// (--audit-forward) to all-in-one B, whose queue is JetStream on a real nats-server
// (--audit-queue-nats); both read the cluster with the same kubeconfig. After the rollout
// scenario (create with 2 replicas, scale to 4, change the image, scale to 2, delete), every
// object of the namespace (the Deployment, its ReplicaSets, their Pods) has the same stored
// traces in A and B: the same windows and trace IDs and, span for span, the same IDs, parents,
// names, times, sources, tags and logs (audit events, Kubernetes Events and diffs alike). And B
// did consume through JetStream: /healthz says "nats: connected", it has no durable local queue,
// it consumed messages, and the stream stored messages and holds none unacknowledged at the end.
func TestNATSQueueControlPlane(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ctx := t.Context()
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	policy, err := filepath.Abs(filepath.Join("..", "deploy", "audit-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kelemetry-e2e-natsqueue-")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// Stopped in this order when the test ends: the cluster and A (which flushes its last
	// forwards), then B, then nats-server.
	var (
		nats *cluster.NATS
		e    *cluster.Env
		b    *cluster.AllInOne
	)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if e != nil {
			if err := e.Stop(sctx); err != nil {
				t.Errorf("stop the environment: %v", err)
			}
		}
		if b != nil {
			if err := b.Stop(); err != nil {
				t.Errorf("stop all-in-one B: %v", err)
			}
		}
		if nats != nil {
			if err := nats.Stop(); err != nil {
				t.Errorf("stop nats-server: %v", err)
			}
		}
		if t.Failed() || os.Getenv(envKeep) == "1" {
			t.Logf("kept the work folder %s (env/kelemetry.log is A's, b.log B's, nats.log nats-server's)", dir)
			if b != nil && t.Failed() {
				t.Logf("B's log:\n%s", tail(b.LogFile, 4000))
			}
			return
		}
		os.RemoveAll(dir)
	})

	nats, err = cluster.StartNATS(ctx, cluster.NATSOptions{BinDir: binDir, StoreDir: filepath.Join(dir, "nats"),
		LogFile: filepath.Join(dir, "nats.log"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	bOpts := cluster.AllInOneOptions{
		BinDir: binDir, Cluster: clusterName, DataDir: filepath.Join(dir, "b-data"), LogFile: filepath.Join(dir, "b.log"),
		ExtraArgs: []string{"--audit-queue-nats=" + nats.URL}, Logger: logger,
	}
	bAudit, err := cluster.PlanAllInOne(&bOpts) // plain HTTP: A posts without a client certificate
	if err != nil {
		t.Fatal(err)
	}
	e, err = cluster.StartEnv(ctx, cluster.EnvOptions{
		BinDir: binDir, ClusterName: clusterName, AuditPolicyFile: policy, Nodes: 1,
		WorkDir: filepath.Join(dir, "env"), KeepWorkDir: true, Logger: logger,
		AllInOneArgs: []string{"--audit-forward=" + bAudit},
	})
	if err != nil {
		t.Fatalf("start the environment: %v", err)
	}
	// B needs the cluster's kubeconfig, written when the cluster starts; until B listens, A keeps
	// the batches in its forward buffer and retries them in order.
	bOpts.Kubeconfig = e.Cluster.Kubeconfig
	if b, err = cluster.StartAllInOne(ctx, bOpts); err != nil {
		t.Fatalf("start all-in-one B: %v", err)
	}
	ready := time.Now()
	t.Logf("environment, nats-server and B ready in %s", ready.Sub(start).Round(time.Millisecond))
	healthy := func() error { return errors.Join(e.Healthy(), b.Exited(), nats.Exited()) }
	apiA, apiB := kapi.New(e.Kelemetry.URL), kapi.New(b.URL)

	const ns = "natsqueue"
	s := &scenario.Session{Client: e.Cluster.Client, Namespace: ns, Timeout: clusterTimeout, PollInterval: pollInterval,
		Step: func(line string) { t.Log("step:", line) }, Healthy: healthy}
	if err := scenario.CreateNamespace(ctx, s); err != nil {
		t.Fatal(err)
	}
	res, err := scenario.Rollout(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	clusterDone := time.Now()
	if len(res.ReplicaSets) != 2 {
		t.Fatalf("%d ReplicaSets after the image change, want 2: %v", len(res.ReplicaSets), res.ReplicaSets)
	}

	// A has the whole rollout: the Deployment's delete and its two ReplicaSets, each with its Pods.
	pods := slices.Compact(slices.Sorted(slices.Values(res.Pods)))
	pollUntil(t, kelemetryTimeout, "the rollout in A", healthy, func(ctx context.Context) error {
		return rolloutComplete(ctx, apiA, ns, res.Deployment, res.ReplicaSets, pods)
	})

	// B has the same trees, span for span.
	var trees []string
	pollUntil(t, kelemetryTimeout, "the same trees in B as in A", healthy, func(ctx context.Context) error {
		a, err := storedTrees(ctx, apiA, ns)
		if err != nil {
			return fmt.Errorf("A: %w", err)
		}
		bt, err := storedTrees(ctx, apiB, ns)
		if err != nil {
			return fmt.Errorf("B: %w", err)
		}
		if err := sameLines(bt, a); err != nil {
			return err
		}
		trees = a
		return nil
	})
	same := time.Now()
	objects, spans, auditSpans, diffLogs := 0, 0, 0, 0
	for _, l := range trees {
		switch {
		case strings.HasPrefix(l, "object "):
			objects++
		default:
			spans++
			if strings.Contains(l, " source=audit ") && strings.Contains(l, " "+kapi.TagSpanKind+"="+kapi.KindEvent+" ") {
				auditSpans++
			}
			diffLogs += strings.Count(l, "event=diff")
		}
	}
	if want := 1 + len(res.ReplicaSets) + len(pods); objects < want {
		t.Errorf("%d objects in the namespace, want at least %d (the Deployment, its ReplicaSets, their Pods)", objects, want)
	}
	if diffLogs == 0 {
		t.Error("no diff log in the compared trees: the comparison would not cover diffs")
	}

	// B consumed through JetStream; A through its durable local queue.
	hA, err := apiA.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hB, err := apiB.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hB.Queue != "nats: connected" || hA.Queue != "durable: ok" {
		t.Errorf("/healthz queue: B %q (want \"nats: connected\"), A %q (want \"durable: ok\")", hB.Queue, hA.Queue)
	}
	if _, err := os.Stat(filepath.Join(bOpts.DataDir, "audit-queue")); !os.IsNotExist(err) {
		t.Errorf("B has a durable local queue folder (%v): its queue must be JetStream alone", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "env", "kelemetry-data", "audit-queue")); err != nil {
		t.Errorf("A's durable local queue: %v", err)
	}
	// Every message the stream stored was published and then consumed and acknowledged by B, the
	// only process on it: once the stream holds none (work-queue retention removes a message when
	// it is acknowledged), B's counters, read after the stream, cover its last sequence.
	var (
		st                  cluster.StreamState
		published, consumed float64
	)
	pollUntil(t, kelemetryTimeout, "every message of "+natsStream+" consumed by B", healthy, func(ctx context.Context) error {
		if st, err = nats.Stream(ctx, natsStream); err != nil {
			return err
		}
		published = metricSum(t, b.URL+"/metrics", "kelemetry_natsqueue_published")
		consumed = metricSum(t, b.URL+"/metrics", "kelemetry_natsqueue_consumed")
		if st.Messages != 0 || st.LastSeq < uint64(auditSpans) || published < float64(st.LastSeq) || consumed < float64(st.LastSeq) {
			return fmt.Errorf("stream %s: %+v, B published %v and consumed %v; want no message left, at least the %d audit event spans compared stored, and all of them published and consumed by B",
				natsStream, st, published, consumed, auditSpans)
		}
		return nil
	})
	fwd := metricSum(t, e.Kelemetry.URL+"/metrics", "kelemetry_audit_forward_batches")
	dropped := metricSum(t, e.Kelemetry.URL+"/metrics", "kelemetry_audit_forward_dropped_batches")
	if fwd == 0 || dropped != 0 {
		t.Errorf("A forwarded %v batches and dropped %v, want some and none", fwd, dropped)
	}
	t.Logf("same trees: %d objects, %d spans (%d audit event spans, %d diff logs); B published %v, consumed %v; stream %+v; A forwarded %v batches",
		objects, spans, auditSpans, diffLogs, published, consumed, st, fwd)
	logTimings(t, start, "setup", ready.Sub(start).Round(time.Millisecond), "cluster steps", clusterDone.Sub(ready).Round(time.Millisecond),
		"until the same trees", same.Sub(clusterDone).Round(time.Millisecond))
}

// rolloutComplete checks that c has the rollout's Deployment with its delete and both
// ReplicaSets as children, each ReplicaSet with its Pods.
func rolloutComplete(ctx context.Context, c *kapi.Client, ns, deployment string, replicaSets, pods []string) error {
	q := kapi.Query{Cluster: clusterName, Group: "apps", Resource: "deployments", Namespace: ns, Name: deployment}
	dep, err := c.ObjectTraces(ctx, q)
	if err != nil {
		return err
	}
	if err := sameSet(dep.LinksTo(kapi.RoleChild, "replicasets"), replicaSets); err != nil {
		return fmt.Errorf("the Deployment's ReplicaSets: %w", err)
	}
	if !dep.HasEvent("*", "delete", "") {
		return errors.New("the Deployment's delete is not there yet")
	}
	for _, rs := range replicaSets {
		o, err := c.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs})
		if err != nil {
			return err
		}
		var want []string
		for _, p := range pods {
			if strings.HasPrefix(p, rs+"-") {
				want = append(want, p)
			}
		}
		if err := containsAll(o.LinksTo(kapi.RoleChild, "pods"), want); err != nil {
			return fmt.Errorf("ReplicaSet %s's Pods: %w", rs, err)
		}
	}
	return nil
}

// storedTrees returns, sorted, one line per object of namespace ns (its identity and windows)
// and one per span of the stored trace of each window: everything the API serves about them.
// Tags and logs are sorted within a line: their order carries no meaning.
func storedTrees(ctx context.Context, c *kapi.Client, ns string) ([]string, error) {
	const limit = 10000
	objs, err := c.Objects(ctx, kapi.Query{Cluster: clusterName, Namespace: ns, Limit: limit})
	if err != nil {
		return nil, err
	}
	if len(objs) == limit {
		return nil, fmt.Errorf("%d objects or more in %s", limit, ns)
	}
	var lines []string
	for _, o := range objs {
		key := fmt.Sprintf("%s/%s %s/%s", o.Group, o.Resource, o.Namespace, o.Name)
		var windows []string
		for _, w := range o.Windows {
			windows = append(windows, w.Start.UTC().Format(time.RFC3339Nano)+"="+w.TraceID)
		}
		sort.Strings(windows)
		lines = append(lines, fmt.Sprintf("object %s version=%s uid=%s windows=%v", key, o.Version, o.UID, windows))
		for _, w := range o.Windows {
			tr, err := c.StoredTrace(ctx, w.TraceID)
			if err != nil {
				return nil, err
			}
			for _, sp := range tr.Spans {
				lines = append(lines, key+" "+spanLine(tr, sp))
			}
		}
	}
	sort.Strings(lines)
	return lines, nil
}

// processLocalTags are the span tags whose value each process measures for itself rather than
// takes from what it ingested: compared by presence, not value. kelemetry.diff.informer_latency
// is how long after the request this process's own informer saw the version whose diff the span
// carries (its clock and watch; e.g. 1ms in one process, 2ms in the other).
var processLocalTags = map[string]bool{"kelemetry.diff.informer_latency": true}

// spanLine is one stored span as text: IDs, references, name, times, source, tags (the values
// of processLocalTags masked), logs.
func spanLine(tr kapi.Trace, sp kapi.Span) string {
	var refs, tags, logs []string
	for _, r := range sp.References {
		refs = append(refs, r.RefType+":"+r.TraceID+"/"+r.SpanID)
	}
	sort.Strings(refs)
	for _, kv := range sp.Tags {
		if processLocalTags[kv.Key] {
			tags = append(tags, kv.Key+"=*")
			continue
		}
		tags = append(tags, fmt.Sprintf("%s=%v", kv.Key, kv.Value))
	}
	sort.Strings(tags)
	for _, l := range sp.Logs {
		var fields []string
		for _, f := range l.Fields {
			fields = append(fields, fmt.Sprintf("%s=%v", f.Key, f.Value))
		}
		sort.Strings(fields)
		logs = append(logs, fmt.Sprintf("@%d %s", l.Timestamp, strings.Join(fields, " ")))
	}
	sort.Strings(logs)
	return fmt.Sprintf("span %s/%s refs=%v op=%q start=%d duration=%d source=%s %s | %s",
		sp.TraceID, sp.SpanID, refs, sp.OperationName, sp.StartTime, sp.Duration, tr.Source(sp),
		strings.Join(tags, " "), strings.Join(logs, " | "))
}

// sameLines compares two sorted line lists, naming a few lines each side lacks.
func sameLines(got, want []string) error {
	var missing, extra []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return nil
	}
	show := func(ls []string) string {
		var b strings.Builder
		for k, l := range ls {
			if k == 3 {
				fmt.Fprintf(&b, "\n    ... %d more", len(ls)-k)
				break
			}
			if len(l) > 600 {
				l = l[:600] + "..."
			}
			b.WriteString("\n    " + l)
		}
		return b.String()
	}
	return fmt.Errorf("%d lines against %d: %d missing:%s\n  %d extra:%s", len(got), len(want), len(missing), show(missing), len(extra), show(extra))
}
