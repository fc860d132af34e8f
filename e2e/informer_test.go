package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

// metadataAuditPolicy audits every request at Metadata level (no request or response bodies) and
// skips Leases: the audit events of writes carry no object, so the only source of diffs is the
// all-in-one's informer (on by default with --kubeconfig).
const metadataAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: "coordination.k8s.io"
    resources: ["leases"]
- level: Metadata
`

// Keys of span logs and tags written by the diff sources (package diff and audit of the main
// module; the e2e module does not import it).
const (
	logTypeDiff      = "diff"
	logTypeSnapshot  = "snapshot"
	fieldDiffPath    = "kelemetry.diff.path"
	fieldDiffOp      = "kelemetry.diff.op"
	fieldDiffOld     = "kelemetry.diff.old"
	fieldDiffNew     = "kelemetry.diff.new"
	fieldSnapKind    = "kelemetry.snapshot.kind"
	opUnavailable    = "unavailable"
	tagInformerDelay = "kelemetry.diff.informer_latency"
	// informerJoinWait is the all-in-one's join wait (audit.DefaultInformerJoinWait): how long
	// after its completion a body-less write waits for the informer's record.
	informerJoinWait = 5 * time.Second
	// webhookBatchWait is kube-apiserver's --audit-webhook-batch-max-wait in the test cluster.
	webhookBatchWait = time.Second
)

// TestInformerDiffMetadataAudit runs a cluster of its own whose kube-apiserver audits at
// Metadata level, with the all-in-one's informer diff source on. A Deployment is created, its
// image changed with an update, its spec.replicas changed with an update, its labels and
// spec.minReadySeconds changed with a merge patch, and it is deleted. The create span carries
// the creation snapshot, the image and replica changes appear as diff logs on the admin's update
// spans, the patch's changes on its patch span, the delete span carries a deletion snapshot,
// every admin write was joined with the informer's record within the join wait (no "diff
// unavailable"), and the spans are stored promptly.
//
// A Metadata-level audit event has no request body, and kube-apiserver fills
// objectRef.resourceVersion from the decoded request object, which a patch does not have (the
// patch document is not an object), and a create has none yet: creates and patches are joined by
// time (the object's first creation, or change, seen since the request that no other write took;
// see changes.Cache.Find), updates and deletes by resourceVersion.
func TestInformerDiffMetadataAudit(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	e, client, kube2 := startMetadataEnv(t)
	health := e.Healthy
	poll := func(timeout time.Duration, what string, check func(ctx context.Context) error) {
		t.Helper()
		pollUntil(t, timeout, what, health, check)
	}
	ctx := t.Context()
	s := &scenario.Session{Client: kube2, Namespace: "informer-diff", Timeout: clusterTimeout, PollInterval: pollInterval,
		Step: func(line string) { t.Log("step:", line) }, Healthy: health}
	if err := scenario.CreateNamespace(ctx, s); err != nil {
		t.Fatal(err)
	}
	objTraces := func(ctx context.Context, resource, group, name string) (kapi.ObjectTraces, error) {
		return client.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Group: group, Resource: resource, Namespace: s.Namespace, Name: name})
	}

	// Warm-up: the all-in-one starts before kube-apiserver, so its informer resolves the
	// resources with backoff, then lists each of them (about 60, throttled by the client's rate
	// limit: several seconds). An object written before its resource was listed has no base
	// version, so update a Deployment of no replicas until an update span carries its diff: then
	// Deployments are watched.
	start := time.Now()
	deps := kube2.AppsV1().Deployments(s.Namespace)
	if _, err := deps.Create(ctx, scenario.NewDeployment(s.Namespace, "warmup", "registry.example/warmup:1", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, lastWrite := 0, time.Time{}
	poll(90*time.Second, "a Deployment update span with an informer diff (the informer is watching Deployments)", func(ctx context.Context) error {
		if time.Since(lastWrite) > informerJoinWait+2*webhookBatchWait {
			n++
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				d, err := deps.Get(ctx, "warmup", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if d.Annotations == nil {
					d.Annotations = map[string]string{}
				}
				d.Annotations["n"] = strconv.Itoa(n)
				_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return err
			}
			lastWrite = time.Now()
		}
		o, err := objTraces(ctx, "deployments", "apps", "warmup")
		if err != nil {
			return err
		}
		for _, sp := range adminSpans(o, "update") {
			if len(diffLogs(sp, "metadata.annotations.n")) > 0 || len(diffLogs(sp, "metadata.annotations")) > 0 {
				return nil
			}
		}
		return fmt.Errorf("no update span with a diff of metadata.annotations.n yet (%d updates)", n)
	})
	t.Logf("informer ready: %d warm-up updates, %s", n, time.Since(start).Round(time.Millisecond))

	// The scenario.
	start = time.Now()
	const name, image1, image2 = "web", "registry.example/web:1", "registry.example/web:2"
	if err := s.CreateDeployment(ctx, name, image1, 1); err != nil {
		t.Fatal(err)
	}
	update := func(what string, change func(spec *scenarioSpec)) {
		t.Helper()
		s.Step("update deployment " + name + ": " + what)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := deps.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(&scenarioSpec{replicas: d.Spec.Replicas, containers: d.Spec.Template.Spec.Containers})
			_, err = deps.Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("update deployment %s (%s): %v", name, what, err)
		}
	}
	update("image="+image2, func(sp *scenarioSpec) { sp.containers[0].Image = image2 })
	update("replicas=3", func(sp *scenarioSpec) { *sp.replicas = 3 })
	// Let the deployment controller record the new generation, so that the trace also has a
	// successful status update (a controller's write through the status subresource).
	poll(clusterTimeout, "the Deployment's status.observedGeneration catches up", func(ctx context.Context) error {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration != d.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", d.Status.ObservedGeneration, d.Generation)
		}
		return nil
	})
	s.Step("patch deployment " + name + ": label patched=yes, minReadySeconds=5")
	if _, err := deps.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}},"spec":{"minReadySeconds":5}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch deployment %s: %v", name, err)
	}
	poll(clusterTimeout, "the Deployment's status.observedGeneration catches up after the patch", func(ctx context.Context) error {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration != d.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", d.Status.ObservedGeneration, d.Generation)
		}
		return nil
	})
	s.Step("delete deployment " + name)
	if err := deps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()

	imagePath := "spec.template.spec.containers[name=main].image"
	var dep kapi.ObjectTraces
	poll(kelemetryTimeout, "the Deployment's audit spans with informer diffs", func(ctx context.Context) error {
		o, err := objTraces(ctx, "deployments", "apps", name)
		if err != nil {
			return err
		}
		dep = o
		return checkInformerDiffs(o, imagePath, image1, image2)
	})
	stored := time.Since(deleted)
	t.Logf("Deployment spans with diffs stored %s after the delete returned (join wait %s, webhook batches every %s); scenario %s",
		stored.Round(time.Millisecond), informerJoinWait, webhookBatchWait, time.Since(start).Round(time.Millisecond))
	// Found at once, the delete's record is attached without waiting: its span is stored within
	// a webhook batch or two, the store's flush and the poll; never after a full join wait.
	if limit := informerJoinWait; stored > limit {
		t.Errorf("the delete's span was stored %s after the delete, more than the join wait %s", stored, limit)
	}
	t.Logf("Deployment: %d audit spans: %s", len(dep.SourceSpans(kapi.SourceAudit)), logSummary(dep.SourceSpans(kapi.SourceAudit)))
}

// scenarioSpec is the part of a Deployment the updates change.
type scenarioSpec struct {
	replicas   *int32
	containers []corev1.Container
}

// checkInformerDiffs checks the Deployment's admin writes: the create's creation snapshot, the
// image update's diff, the replicas update's diff, the patch's diff, the delete's deletion
// snapshot, and that each was joined with the informer's record within the join wait.
func checkInformerDiffs(o kapi.ObjectTraces, imagePath, image1, image2 string) error {
	creates, updates, patches, deletes := adminSpans(o, "create"), adminSpans(o, "update"), adminSpans(o, "patch"), adminSpans(o, "delete")
	if len(creates) != 1 || len(updates) != 2 || len(patches) != 1 || len(deletes) != 1 {
		return fmt.Errorf("%d admin creates, %d updates, %d patches and %d deletes, want 1, 2, 1 and 1", len(creates), len(updates), len(patches), len(deletes))
	}
	var created bool
	for _, f := range spanLogs(creates[0]) {
		created = created || (f["event"] == logTypeSnapshot && f[fieldSnapKind] == "creation" && strings.Contains(f["message"], image1))
	}
	if !created {
		return fmt.Errorf("the create span has no creation snapshot with image %s; logs: %s", image1, logSummary(creates))
	}
	var label, minReady bool
	for _, f := range diffLogs(patches[0], "") {
		label = label || (strings.HasPrefix(f[fieldDiffPath], "metadata.labels") && strings.Contains(f[fieldDiffPath]+" "+f[fieldDiffNew], "patched"))
		minReady = minReady || (f[fieldDiffPath] == "spec.minReadySeconds" && f[fieldDiffNew] == "5")
	}
	if !label || !minReady {
		return fmt.Errorf("the patch span lacks the diff of the label patched or of spec.minReadySeconds 0 -> 5; logs: %s", logSummary(patches))
	}
	var image, replicas bool
	for _, sp := range updates {
		for _, f := range diffLogs(sp, imagePath) {
			image = image || (f[fieldDiffOld] == image1 && f[fieldDiffNew] == image2)
		}
		for _, f := range diffLogs(sp, "spec.replicas") {
			replicas = replicas || (f[fieldDiffOld] == "1" && f[fieldDiffNew] == "3")
		}
	}
	if !image {
		return fmt.Errorf("no update span with the diff %s %s -> %s; logs: %s", imagePath, image1, image2, logSummary(updates))
	}
	if !replicas {
		return fmt.Errorf("no update span with the diff spec.replicas 1 -> 3; logs: %s", logSummary(updates))
	}
	var snapshot bool
	for _, f := range spanLogs(deletes[0]) {
		snapshot = snapshot || (f["event"] == logTypeSnapshot && f[fieldSnapKind] == "deletion")
	}
	if !snapshot {
		return fmt.Errorf("the delete span has no deletion snapshot; logs: %s", logSummary(deletes))
	}
	// The deployment controller's successful status updates carry their diff too.
	var status []kapi.Span
	for _, sp := range o.SourceSpans(kapi.SourceAudit) {
		if sp.Tag(kapi.TagUser) == deploymentController && sp.Tag(kapi.TagSubresource) == "status" && sp.Tag("error") != "true" && !strings.Contains(sp.OperationName, "(") {
			status = append(status, sp)
		}
	}
	var observed bool
	for _, sp := range status {
		observed = observed || len(diffLogs(sp, "status.observedGeneration")) > 0
	}
	if !observed {
		return fmt.Errorf("no status update by the deployment controller with a diff of status.observedGeneration; logs: %s", logSummary(status))
	}
	for _, sp := range slices.Concat(creates, updates, patches, deletes, status) {
		for _, f := range spanLogs(sp) {
			if f[fieldDiffOp] == opUnavailable {
				return fmt.Errorf("%s: %s", sp.OperationName, f["message"])
			}
		}
		lat := sp.Tag(tagInformerDelay)
		d, err := time.ParseDuration(lat)
		if err != nil {
			return fmt.Errorf("%s: tag %s = %q: %v", sp.OperationName, tagInformerDelay, lat, err)
		}
		if d > informerJoinWait {
			return fmt.Errorf("%s: the informer saw the write %s after it, more than the join wait %s", sp.OperationName, d, informerJoinWait)
		}
	}
	return nil
}

// adminSpans returns the audit spans of the admin's writes with verb on the object itself.
func adminSpans(o kapi.ObjectTraces, verb string) []kapi.Span {
	var out []kapi.Span
	for _, sp := range o.SourceSpans(kapi.SourceAudit) {
		// Only successful writes: a retried update's 409 Conflict (the controllers write the
		// same object) is a span of its own.
		if sp.Kind() == kapi.KindEvent && sp.Tag(kapi.TagUser) == cluster.AdminUser && sp.Tag(kapi.TagVerb) == verb && sp.Tag(kapi.TagSubresource) == "" &&
			strings.HasPrefix(sp.Tag(kapi.TagStatusCode), "2") {
			out = append(out, sp)
		}
	}
	return out
}

// spanLogs returns the fields of each log of sp; JSON values (kelemetry.diff.old/new) are
// decoded and printed, so that "\"a\"" reads a and 3 reads 3.
func spanLogs(sp kapi.Span) []map[string]string {
	out := make([]map[string]string, 0, len(sp.Logs))
	for _, l := range sp.Logs {
		m := map[string]string{}
		for _, f := range l.Fields {
			v := fmt.Sprint(f.Value)
			if f.Key == fieldDiffOld || f.Key == fieldDiffNew {
				var x any
				if json.Unmarshal([]byte(v), &x) == nil {
					v = fmt.Sprint(x)
				}
			}
			m[f.Key] = v
		}
		out = append(out, m)
	}
	return out
}

// diffLogs returns the diff logs of sp for path ("" for every change, not the notes).
func diffLogs(sp kapi.Span, path string) []map[string]string {
	var out []map[string]string
	for _, f := range spanLogs(sp) {
		if f["event"] != logTypeDiff || f[fieldDiffPath] == "" {
			continue
		}
		if path == "" || f[fieldDiffPath] == path {
			out = append(out, f)
		}
	}
	return out
}

func logSummary(spans []kapi.Span) string {
	var b strings.Builder
	for _, sp := range spans {
		fmt.Fprintf(&b, "[%s:", sp.OperationName)
		for _, f := range spanLogs(sp) {
			msg := f["message"]
			if len(msg) > 100 {
				msg = msg[:100] + "..."
			}
			fmt.Fprintf(&b, " %s %q;", f["event"], msg)
		}
		b.WriteString("]")
	}
	return b.String()
}

// startMetadataEnv starts a second environment (~12 s): a cluster auditing at Metadata level and
// an all-in-one with --kubeconfig (informer diffs on). It is stopped when the test ends; its work
// folder is kept when the test failed or KELEMETRY_E2E_KEEP=1.
func startMetadataEnv(t *testing.T) (*cluster.Env, *kapi.Client, kubernetes.Interface) {
	t.Helper()
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kelemetry-e2e-metadata-")
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "audit-policy-metadata.yaml")
	if err := os.WriteFile(policy, []byte(metadataAuditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := time.Now()
	e, err := cluster.StartEnv(t.Context(), cluster.EnvOptions{
		BinDir: binDir, ClusterName: clusterName, AuditPolicyFile: policy, Nodes: 1,
		WorkDir: filepath.Join(dir, "env"), KeepWorkDir: true, Logger: logger,
	})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start the Metadata-audit environment: %v", err)
	}
	t.Logf("Metadata-audit environment ready in %s (work folder %s)", time.Since(start).Round(time.Millisecond), dir)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("stop the Metadata-audit environment: %v", err)
		}
		if t.Failed() || os.Getenv(envKeep) == "1" {
			t.Logf("kept the Metadata-audit work folder %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return e, kapi.New(e.Kelemetry.URL), e.Cluster.Client
}
