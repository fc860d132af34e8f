package e2e_test

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
	"github.com/kelemetry/kelemetry/e2e/scenario"
)

const deploymentController = "system:serviceaccount:kube-system:deployment-controller"

// TestDeploymentRollout: create a Deployment with 2 replicas, scale to 4, change the image,
// scale to 2, delete. The Deployment's trace links to both ReplicaSets, each ReplicaSet to its
// Pods; the audit events of the admin, the controllers, the scheduler and kwok are all there, and
// so are the Kubernetes Events: the Deployment's ScalingReplicaSet Events and each Pod's
// Scheduled Event.
func TestDeploymentRollout(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "rollout")
	res, err := scenario.Rollout(t.Context(), session(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	name, pods, replicaSets := res.Deployment, res.Pods, res.ReplicaSets
	if len(replicaSets) != 2 {
		t.Fatalf("%d ReplicaSets after the image change, want 2: %v", len(replicaSets), replicaSets)
	}
	clusterDone, deleted := res.ClusterDone, res.Deleted

	// The Deployment: its own events, and a child link to each ReplicaSet.
	dep := traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: name}, "the Deployment's trace", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleChild, "replicasets"), replicaSets); err != nil {
			return fmt.Errorf("child ReplicaSets: %w", err)
		}
		scales := 0
		for _, e := range o.Events() {
			if e.User == cluster.AdminUser && e.Subresource == "scale" {
				scales++
			}
		}
		if scales != 2 {
			return fmt.Errorf("%d scale events by the admin, want 2", scales)
		}
		return wantEvents(o,
			[3]string{cluster.AdminUser, "create", ""},
			[3]string{cluster.AdminUser, "update", "scale"},
			[3]string{cluster.AdminUser, "patch", ""},
			[3]string{deploymentController, "update", "status"},
			[3]string{cluster.AdminUser, "delete", ""},
		)
	})
	t.Logf("Deployment: %d windows, %d spans, children %v", len(dep.Object.Windows), len(dep.Spans("")), dep.Links(kapi.RoleChild))

	// The deployment controller reports each scale step of the rollout with a ScalingReplicaSet
	// Event (create, scale up, at least one step up and one down for the new image, scale down):
	// every one the cluster lists is a span of the Deployment's trace, exactly once.
	var scaling []corev1.Event
	traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: name}, "the Deployment's ScalingReplicaSet Events", func(o kapi.ObjectTraces) error {
		evs, err := listEvents(t.Context(), ns, regarding("Deployment", name, "ScalingReplicaSet"))
		if err != nil {
			return err
		}
		if len(evs) < 5 {
			return fmt.Errorf("the cluster lists %d ScalingReplicaSet Events of the Deployment, want at least 5", len(evs))
		}
		var spans []eventSpan
		for _, s := range eventSpans(o) {
			if s.OperationName == "ScalingReplicaSet" {
				spans = append(spans, s)
			}
		}
		scaling = evs
		return matchEvents(evs, spans)
	})
	for _, e := range scaling {
		t.Logf("ScalingReplicaSet span: %s", e.Message)
	}

	// Each ReplicaSet: the Deployment as its only parent, and its Pods as children.
	podsOf := map[string][]string{}
	for _, p := range pods {
		for _, rs := range replicaSets {
			if strings.HasPrefix(p, rs+"-") {
				podsOf[rs] = append(podsOf[rs], p)
			}
		}
	}
	for _, rs := range replicaSets {
		if len(podsOf[rs]) == 0 {
			t.Errorf("no pod of ReplicaSet %s was seen", rs)
		}
		traces(t, kapi.Query{Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs}, "ReplicaSet "+rs, func(o kapi.ObjectTraces) error {
			if err := sameSet(o.LinksTo(kapi.RoleParent, "deployments"), []string{name}); err != nil {
				return fmt.Errorf("parent: %w", err)
			}
			children := o.LinksTo(kapi.RoleChild, "pods")
			for _, c := range children {
				if !strings.HasPrefix(c, rs+"-") {
					return fmt.Errorf("child pod %s is not %s's", c, rs)
				}
			}
			return containsAll(children, podsOf[rs])
		})
	}

	// Every Pod seen running: created by the ReplicaSet controller, bound by the scheduler,
	// made Running by kwok, under its ReplicaSet.
	seen := map[string]bool{}
	for _, p := range pods {
		if seen[p] {
			continue
		}
		seen[p] = true
		traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: p}, "Pod "+p, func(o kapi.ObjectTraces) error {
			if len(o.LinksTo(kapi.RoleParent, "replicasets")) != 1 {
				return fmt.Errorf("parents %v, want one ReplicaSet", o.Links(kapi.RoleParent))
			}
			if err := wantEvents(o,
				[3]string{"system:serviceaccount:kube-system:replicaset-controller", "create", ""},
				[3]string{"system:kube-scheduler", "create", "binding"},
				[3]string{cluster.KwokUser, "patch", "status"},
			); err != nil {
				return err
			}
			// The scheduler's Scheduled Event is a span of the Pod's trace.
			evs, err := listEvents(t.Context(), ns, regarding("Pod", p, "Scheduled"))
			if err != nil {
				return err
			}
			if len(evs) == 0 {
				return fmt.Errorf("the cluster lists no Scheduled Event of the Pod yet")
			}
			var spans []eventSpan
			for _, s := range eventSpans(o) {
				if s.OperationName == "Scheduled" {
					spans = append(spans, s)
				}
			}
			return matchEvents(evs, spans)
		})
	}
	logTimings(t, start, "cluster steps", clusterDone.Sub(start).Round(time.Millisecond),
		"delete+gc", deleted.Sub(clusterDone).Round(time.Millisecond), "trace checks", time.Since(deleted).Round(time.Millisecond),
		"pods", len(seen))

	// kubectl kelemetry prints the rollout's tree: "deploy" resolved by the real API server's
	// discovery through the kubeconfig, the ReplicaSets under the Deployment.
	out := kubectlKelemetry(t, "trace", "deploy/"+name, "-n", ns, "--since", "1h")
	if !strings.Contains(out, "deployments/"+name) {
		t.Errorf("kubectl kelemetry trace: no deployments/%s in\n%s", name, out)
	}
	for _, rs := range replicaSets {
		if !strings.Contains(out, "─ replicasets/"+rs) {
			t.Errorf("kubectl kelemetry trace: ReplicaSet %s is not under the Deployment in\n%s", rs, out)
		}
	}
	if !strings.Contains(out, "* on the critical path:") {
		t.Errorf("kubectl kelemetry trace: no critical path in\n%s", out)
	}
}

// kubectlKelemetry builds cmd/kubectl-kelemetry once and runs it with the test cluster's admin
// kubeconfig against the all-in-one; it returns what it printed.
func kubectlKelemetry(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(env.WorkDir, "kubectl-kelemetry")
	pluginBuild.Do(func() {
		cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kubectl-kelemetry")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("build kubectl-kelemetry: %w: %s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	cmd := exec.CommandContext(t.Context(), bin, append(args, "--kubeconfig", env.Cluster.Kubeconfig, "--server", env.Kelemetry.URL, "--color", "never")...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("kubectl-kelemetry %v: %v: %s", args, err, stderr)
	}
	return string(out)
}

var (
	pluginBuild sync.Once
	pluginErr   error
)

// TestAncestors: from one ReplicaSet, the only way up is its Deployment, whose trace has that
// ReplicaSet under it; from one Pod, the only way up is that ReplicaSet.
func TestAncestors(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "ancestors")
	res, err := scenario.Ancestors(t.Context(), session(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	name, rs, pods := res.Deployment, res.ReplicaSet, res.Pods

	traces(t, kapi.Query{Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs}, "the ReplicaSet's parent", func(o kapi.ObjectTraces) error {
		parents := o.Links(kapi.RoleParent)
		want := kapi.Target{Group: "apps", Resource: "deployments", Namespace: ns, Name: name}
		if len(parents) != 1 || parents[0] != want {
			return fmt.Errorf("parents %v, want exactly %v", parents, want)
		}
		return nil
	})
	traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: name}, "the Deployment's children", func(o kapi.ObjectTraces) error {
		if len(o.Links(kapi.RoleParent)) != 0 {
			return fmt.Errorf("the Deployment has parents %v: it should be the root", o.Links(kapi.RoleParent))
		}
		return sameSet(o.LinksTo(kapi.RoleChild, "replicasets"), []string{rs})
	})
	traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: pods[0]}, "the Pod's parent", func(o kapi.ObjectTraces) error {
		parents := o.Links(kapi.RoleParent)
		want := kapi.Target{Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs}
		if len(parents) != 1 || parents[0] != want {
			return fmt.Errorf("parents %v, want exactly %v", parents, want)
		}
		return nil
	})
	logTimings(t, start)
}

// TestCronJobJob: a Job created from a CronJob by hand (what `kubectl create job --from=cronjob/x`
// does: the CronJob is the Job's controller owner), its Pod completed by kwok. CronJob -> Job ->
// Pod in one tree.
func TestCronJobJob(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "cronjob")
	res, err := scenario.CronJob(t.Context(), session(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	cronJob, job, pod := res.CronJob, res.Job, res.Pod
	clusterDone := time.Now()

	traces(t, kapi.Query{Group: "batch", Resource: "cronjobs", Namespace: ns, Name: cronJob}, "the CronJob's children", func(o kapi.ObjectTraces) error {
		if err := wantEvents(o, [3]string{cluster.AdminUser, "create", ""}); err != nil {
			return err
		}
		return sameSet(o.LinksTo(kapi.RoleChild, "jobs"), []string{job})
	})
	traces(t, kapi.Query{Group: "batch", Resource: "jobs", Namespace: ns, Name: job}, "the Job's links", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "cronjobs"), []string{cronJob}); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
		if err := sameSet(o.LinksTo(kapi.RoleChild, "pods"), []string{pod}); err != nil {
			return fmt.Errorf("children: %w", err)
		}
		return wantEvents(o,
			[3]string{cluster.AdminUser, "create", ""},
			[3]string{"system:serviceaccount:kube-system:job-controller", "update", "status"},
		)
	})
	traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: pod}, "the Job Pod's parent", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "jobs"), []string{job}); err != nil {
			return err
		}
		return wantEvents(o,
			[3]string{"system:serviceaccount:kube-system:job-controller", "create", ""},
			[3]string{"system:kube-scheduler", "create", "binding"},
			[3]string{cluster.KwokUser, "patch", "status"},
		)
	})
	logTimings(t, start, "cluster steps", clusterDone.Sub(start).Round(time.Millisecond))
}

// TestParentLinkAnnotation: a ConfigMap naming a Deployment in its kelemetry.io/parent-link
// annotation appears under that Deployment.
func TestParentLinkAnnotation(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "annotations")
	res, err := scenario.Annotations(t.Context(), session(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	dep, cmName := res.Deployment, res.ConfigMap

	traces(t, kapi.Query{Group: "apps", Resource: "deployments", Namespace: ns, Name: dep}, "the ConfigMap under the Deployment", func(o kapi.ObjectTraces) error {
		want := kapi.Target{Resource: "configmaps", Namespace: ns, Name: cmName}
		for _, c := range o.Links(kapi.RoleChild) {
			if c == want {
				return nil
			}
		}
		return fmt.Errorf("children %v, want %v among them", o.Links(kapi.RoleChild), want)
	})
	traces(t, kapi.Query{Resource: "configmaps", Namespace: ns, Name: cmName}, "the ConfigMap's parent", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "deployments"), []string{dep}); err != nil {
			return err
		}
		return wantEvents(o, [3]string{cluster.AdminUser, "create", ""}, [3]string{cluster.AdminUser, "patch", ""})
	})
	logTimings(t, start)
}
