package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

const deploymentController = "system:serviceaccount:kube-system:deployment-controller"

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	_, err := kube.AppsV1().Deployments(ns).UpdateScale(t.Context(), name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("scale %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// TestDeploymentRollout: create a Deployment with 2 replicas, scale to 4, change the image,
// scale to 2, delete. The Deployment's trace links to both ReplicaSets, each ReplicaSet to its
// Pods; the audit events of the admin, the controllers, the scheduler and kwok are all there.
func TestDeploymentRollout(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "rollout")
	ctx := t.Context()
	const name = "demo"

	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, name, "alpine:3.16", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods := waitRolledOut(t, ns, name, 2)
	scale(t, ns, name, 4)
	pods = append(pods, waitRolledOut(t, ns, name, 4)...)
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"alpine:3.17"}]}}}}`
	if _, err := kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set image: %v", err)
	}
	pods = append(pods, waitRolledOut(t, ns, name, 4)...)
	scale(t, ns, name, 2)
	pods = append(pods, waitRolledOut(t, ns, name, 2)...)

	rsList, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var replicaSets []string
	for _, rs := range rsList.Items {
		replicaSets = append(replicaSets, rs.Name)
	}
	if len(replicaSets) != 2 {
		t.Fatalf("%d ReplicaSets after the image change, want 2: %v", len(replicaSets), replicaSets)
	}
	clusterDone := time.Now()

	if err := kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatalf("delete deployment: %v", err)
	}
	waitGone(t, "pods and ReplicaSets of "+name, func(ctx context.Context) (int, error) {
		p, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, err
		}
		r, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, err
		}
		return len(p.Items) + len(r.Items), nil
	})
	deleted := time.Now()

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
			return wantEvents(o,
				[3]string{"system:serviceaccount:kube-system:replicaset-controller", "create", ""},
				[3]string{"system:kube-scheduler", "create", "binding"},
				[3]string{cluster.KwokUser, "patch", "status"},
			)
		})
	}
	logTimings(t, start, "cluster steps", clusterDone.Sub(start).Round(time.Millisecond),
		"delete+gc", deleted.Sub(clusterDone).Round(time.Millisecond), "trace checks", time.Since(deleted).Round(time.Millisecond),
		"pods", len(seen))
}

// TestAncestors: from one ReplicaSet, the only way up is its Deployment, whose trace has that
// ReplicaSet under it; from one Pod, the only way up is that ReplicaSet.
func TestAncestors(t *testing.T) {
	needEnv(t)
	start := time.Now()
	ns := newNamespace(t, "ancestors")
	const name = "anc"
	if _, err := kube.AppsV1().Deployments(ns).Create(t.Context(), newDeployment(ns, name, "alpine:3.16", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods := waitRolledOut(t, ns, name, 1)
	rsList, err := kube.AppsV1().ReplicaSets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil || len(rsList.Items) != 1 {
		t.Fatalf("ReplicaSets: %v (%v)", rsList, err)
	}
	rs := rsList.Items[0].Name

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
	ctx := t.Context()
	labels := map[string]string{"app": "nightly"}
	cj, err := kube.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 1 1 *", // never during a test
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](0),
					Template:     podTemplate(labels, "busybox:1.36", corev1.RestartPolicyNever),
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create cronjob: %v", err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "nightly-manual",
			Namespace:   ns,
			Labels:      cj.Spec.JobTemplate.Labels,
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true),
			}},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if _, err := kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job: %v", err)
	}
	var pod string
	eventually(t, clusterTimeout, "the Job to complete", func(ctx context.Context) error {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Status.Succeeded != 1 {
			return fmt.Errorf("job status %+v", j.Status)
		}
		pl, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		if err != nil {
			return err
		}
		if len(pl.Items) != 1 {
			return fmt.Errorf("%d pods", len(pl.Items))
		}
		pod = pl.Items[0].Name
		return nil
	})
	clusterDone := time.Now()

	traces(t, kapi.Query{Group: "batch", Resource: "cronjobs", Namespace: ns, Name: cj.Name}, "the CronJob's children", func(o kapi.ObjectTraces) error {
		if err := wantEvents(o, [3]string{cluster.AdminUser, "create", ""}); err != nil {
			return err
		}
		return sameSet(o.LinksTo(kapi.RoleChild, "jobs"), []string{job.Name})
	})
	traces(t, kapi.Query{Group: "batch", Resource: "jobs", Namespace: ns, Name: job.Name}, "the Job's links", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "cronjobs"), []string{cj.Name}); err != nil {
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
		if err := sameSet(o.LinksTo(kapi.RoleParent, "jobs"), []string{job.Name}); err != nil {
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
	ctx := t.Context()
	const dep, cmName = "web", "web-config"
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, dep, "nginx:1.27", 1), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	parent, err := json.Marshal(map[string]string{"group": "apps", "version": "v1", "resource": "deployments", "namespace": ns, "name": dep})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns, Annotations: map[string]string{"kelemetry.io/parent-link": string(parent)}},
		Data:       map[string]string{"index.html": "hello"},
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create configmap: %v", err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(ctx, cmName, types.MergePatchType, []byte(`{"data":{"index.html":"hello again"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch configmap: %v", err)
	}
	waitRolledOut(t, ns, dep, 1)

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
