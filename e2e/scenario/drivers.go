package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ParentLinkAnnotation names an object's parent for Kelemetry (a JSON object with group,
// version, resource, namespace and name).
const ParentLinkAnnotation = "kelemetry.io/parent-link"

// PodTemplate is a one-container pod template (kwok runs nothing: the image is never pulled).
func PodTemplate(labels map[string]string, image string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "main", Image: image}},
		},
	}
}

// NewDeployment is a Deployment of one container labelled app=<name>.
func NewDeployment(ns, name, image string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: PodTemplate(labels, image, corev1.RestartPolicyAlways),
		},
	}
}

// CreateDeployment creates a Deployment of NewDeployment.
func (s *Session) CreateDeployment(ctx context.Context, name, image string, replicas int32) error {
	s.step("create deployment %s image=%s replicas=%d", name, image, replicas)
	if _, err := s.Client.AppsV1().Deployments(s.Namespace).Create(ctx, NewDeployment(s.Namespace, name, image, replicas), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create deployment %s: %w", name, err)
	}
	return nil
}

// Scale sets a Deployment's replicas through its scale subresource (kubectl scale).
func (s *Session) Scale(ctx context.Context, name string, replicas int32) error {
	s.step("scale deployment %s replicas=%d", name, replicas)
	_, err := s.Client.AppsV1().Deployments(s.Namespace).UpdateScale(ctx, name, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("scale %s/%s to %d: %w", s.Namespace, name, replicas, err)
	}
	return nil
}

// WaitRolledOut waits until the Deployment's rollout is complete with want ready replicas and no
// old pod left, and returns the names of its pods then.
func (s *Session) WaitRolledOut(ctx context.Context, name string, want int32) ([]string, error) {
	start := time.Now()
	var pods []string
	err := s.wait(ctx, fmt.Sprintf("deployment %s/%s rolled out with %d replicas", s.Namespace, name, want), func(ctx context.Context) error {
		d, err := s.Client.AppsV1().Deployments(s.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want {
			return fmt.Errorf("generation %d observed %d, status %+v", d.Generation, st.ObservedGeneration, st)
		}
		list, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s still terminating", p.Name)
			}
			pods = append(pods, p.Name)
		}
		if len(pods) != int(want) {
			return fmt.Errorf("%d pods, want %d", len(pods), want)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.step("wait deployment %s rolled out replicas=%d (%s)", name, want, time.Since(start).Round(100*time.Millisecond))
	return pods, nil
}

// RolloutResult is what the rollout scenario saw.
type RolloutResult struct {
	Deployment string
	// Pods are the pods seen after each step (a name can repeat).
	Pods []string
	// ReplicaSets are the Deployment's ReplicaSets before its deletion.
	ReplicaSets []string
	// ClusterDone is when the last scale completed; Deleted when the Deployment's pods and
	// ReplicaSets were gone.
	ClusterDone, Deleted time.Time
}

// Rollout creates Deployment demo with 2 replicas, scales it to 4, changes its image, scales it
// to 2, then deletes it and waits until its ReplicaSets and pods are gone.
func Rollout(ctx context.Context, s *Session) (*RolloutResult, error) {
	const name = "demo"
	res := &RolloutResult{Deployment: name}
	deps := s.Client.AppsV1().Deployments(s.Namespace)
	if err := s.CreateDeployment(ctx, name, "alpine:3.16", 2); err != nil {
		return nil, err
	}
	waitAppend := func(n int32) error {
		pods, err := s.WaitRolledOut(ctx, name, n)
		res.Pods = append(res.Pods, pods...)
		return err
	}
	if err := waitAppend(2); err != nil {
		return nil, err
	}
	if err := s.Scale(ctx, name, 4); err != nil {
		return nil, err
	}
	if err := waitAppend(4); err != nil {
		return nil, err
	}
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"alpine:3.17"}]}}}}`
	s.step("patch deployment %s %s", name, patch)
	if _, err := deps.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("set image: %w", err)
	}
	if err := waitAppend(4); err != nil {
		return nil, err
	}
	if err := s.Scale(ctx, name, 2); err != nil {
		return nil, err
	}
	if err := waitAppend(2); err != nil {
		return nil, err
	}
	rsList, err := s.Client.AppsV1().ReplicaSets(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, fmt.Errorf("list ReplicaSets: %w", err)
	}
	for _, rs := range rsList.Items {
		res.ReplicaSets = append(res.ReplicaSets, rs.Name)
	}
	res.ClusterDone = time.Now()

	s.step("delete deployment %s propagation=Background", name)
	if err := deps.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		return nil, fmt.Errorf("delete deployment: %w", err)
	}
	err = s.waitGone(ctx, "pods and ReplicaSets of "+name, func(ctx context.Context) (int, error) {
		p, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, err
		}
		r, err := s.Client.AppsV1().ReplicaSets(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return 0, err
		}
		return len(p.Items) + len(r.Items), nil
	})
	if err != nil {
		return nil, err
	}
	res.Deleted = time.Now()
	s.step("wait pods and replicasets of %s gone (%s)", name, res.Deleted.Sub(res.ClusterDone).Round(100*time.Millisecond))
	return res, nil
}

// AncestorsResult is what the ancestors scenario saw.
type AncestorsResult struct {
	Deployment, ReplicaSet string
	Pods                   []string
}

// Ancestors creates Deployment anc with one replica and waits until it is rolled out.
func Ancestors(ctx context.Context, s *Session) (*AncestorsResult, error) {
	const name = "anc"
	if err := s.CreateDeployment(ctx, name, "alpine:3.16", 1); err != nil {
		return nil, err
	}
	pods, err := s.WaitRolledOut(ctx, name, 1)
	if err != nil {
		return nil, err
	}
	rsList, err := s.Client.AppsV1().ReplicaSets(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, fmt.Errorf("list ReplicaSets: %w", err)
	}
	if len(rsList.Items) != 1 {
		return nil, fmt.Errorf("%d ReplicaSets of %s, want 1", len(rsList.Items), name)
	}
	return &AncestorsResult{Deployment: name, ReplicaSet: rsList.Items[0].Name, Pods: pods}, nil
}

// CronJobResult is what the cronjob scenario saw.
type CronJobResult struct {
	CronJob, Job, Pod string
}

// CronJob creates CronJob nightly (scheduled never during a test) and a Job from it by hand, as
// `kubectl create job --from=cronjob/nightly` does (the CronJob is the Job's controller owner),
// and waits until kwok completed the Job's Pod.
func CronJob(ctx context.Context, s *Session) (*CronJobResult, error) {
	labels := map[string]string{"app": "nightly"}
	s.step("create cronjob nightly schedule=%s image=busybox:1.36", quote("0 3 1 1 *"))
	cj, err := s.Client.BatchV1().CronJobs(s.Namespace).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: s.Namespace},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 1 1 *", // never during a test
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To[int32](0),
					Template:     PodTemplate(labels, "busybox:1.36", corev1.RestartPolicyNever),
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create cronjob: %w", err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "nightly-manual",
			Namespace:   s.Namespace,
			Labels:      cj.Spec.JobTemplate.Labels,
			Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: ptr.To(true),
			}},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	s.step("create job %s from=cronjob/%s", job.Name, cj.Name)
	if _, err := s.Client.BatchV1().Jobs(s.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	res := &CronJobResult{CronJob: cj.Name, Job: job.Name}
	start := time.Now()
	err = s.wait(ctx, "the Job to complete", func(ctx context.Context) error {
		j, err := s.Client.BatchV1().Jobs(s.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if j.Status.Succeeded != 1 {
			return fmt.Errorf("job status %+v", j.Status)
		}
		pl, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		if err != nil {
			return err
		}
		if len(pl.Items) != 1 {
			return fmt.Errorf("%d pods", len(pl.Items))
		}
		res.Pod = pl.Items[0].Name
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.step("wait job %s succeeded pod=%s (%s)", job.Name, res.Pod, time.Since(start).Round(100*time.Millisecond))
	return res, nil
}

// AnnotationsResult is what the annotations scenario saw.
type AnnotationsResult struct {
	Deployment, ConfigMap string
}

// Annotations creates Deployment web and ConfigMap web-config whose parent-link annotation names
// the Deployment, patches the ConfigMap and waits until the Deployment is rolled out.
func Annotations(ctx context.Context, s *Session) (*AnnotationsResult, error) {
	const dep, cmName = "web", "web-config"
	if err := s.CreateDeployment(ctx, dep, "nginx:1.27", 1); err != nil {
		return nil, err
	}
	parent, err := json.Marshal(map[string]string{"group": "apps", "version": "v1", "resource": "deployments", "namespace": s.Namespace, "name": dep})
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: s.Namespace, Annotations: map[string]string{ParentLinkAnnotation: string(parent)}},
		Data:       map[string]string{"index.html": "hello"},
	}
	s.step("create configmap %s annotation %s=%s", cmName, ParentLinkAnnotation, parent)
	if _, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create configmap: %w", err)
	}
	patch := `{"data":{"index.html":"hello again"}}`
	s.step("patch configmap %s type=merge %s", cmName, patch)
	if _, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Patch(ctx, cmName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("patch configmap: %w", err)
	}
	if _, err := s.WaitRolledOut(ctx, dep, 1); err != nil {
		return nil, err
	}
	return &AnnotationsResult{Deployment: dep, ConfigMap: cmName}, nil
}
