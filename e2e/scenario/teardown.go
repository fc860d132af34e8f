package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// HoldFinalizer is the finalizer the teardown scenario holds its ConfigMap held with.
const HoldFinalizer = "example.com/hold"

// DefaultHold is how long the teardown scenario keeps its finalizer after the namespace's
// deletion marked the ConfigMap held for deletion.
const DefaultHold = 5 * time.Second

// TeardownResult is what the teardown scenario saw.
type TeardownResult struct {
	Deployment, Service string
	// ConfigMaps are the namespace's ConfigMaps before its deletion (kube-root-ca.crt included);
	// Held is the one with a finalizer.
	ConfigMaps  []string
	Held        string
	ReplicaSets []string
	Pods        []string
	// Deleted is when the namespace's deletion was requested, Marked when Held was seen marked
	// for deletion, Released when its finalizer was removed, Gone when the namespace was gone.
	Deleted, Marked, Released, Gone time.Time
}

// Teardown creates Deployment web (1 replica), Service web, ConfigMap settings and ConfigMap
// held with the finalizer HoldFinalizer, deletes the namespace, waits until the namespace
// controller marked held for deletion, removes its finalizer DefaultHold later, and waits until
// the namespace is gone. The namespace must be the scenario's own: it is deleted.
func Teardown(ctx context.Context, s *Session) (*TeardownResult, error) {
	res := &TeardownResult{Deployment: "web", Service: "web", Held: "held"}
	if err := s.CreateDeployment(ctx, res.Deployment, "nginx:1.27", 1); err != nil {
		return nil, err
	}
	pods, err := s.WaitRolledOut(ctx, res.Deployment, 1)
	if err != nil {
		return nil, err
	}
	res.Pods = pods
	rss, err := s.Client.AppsV1().ReplicaSets(s.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list replicasets: %w", err)
	}
	for _, rs := range rss.Items {
		res.ReplicaSets = append(res.ReplicaSets, rs.Name)
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: res.Service, Namespace: s.Namespace},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": res.Deployment},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	s.step("create service %s port=80", res.Service)
	if _, err := s.Client.CoreV1().Services(s.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create service: %w", err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: s.Namespace}, Data: map[string]string{"mode": "fast"}},
		{ObjectMeta: metav1.ObjectMeta{Name: res.Held, Namespace: s.Namespace, Finalizers: []string{HoldFinalizer}}, Data: map[string]string{"k": "v"}},
	} {
		s.step("create configmap %s finalizers=%v", cm.Name, cm.Finalizers)
		if _, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create configmap %s: %w", cm.Name, err)
		}
	}
	cms, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list configmaps: %w", err)
	}
	for _, cm := range cms.Items {
		res.ConfigMaps = append(res.ConfigMaps, cm.Name)
	}

	s.step("delete namespace %s", s.Namespace)
	res.Deleted = time.Now()
	if err := s.Client.CoreV1().Namespaces().Delete(ctx, s.Namespace, metav1.DeleteOptions{}); err != nil {
		return nil, fmt.Errorf("delete namespace: %w", err)
	}
	if err := s.wait(ctx, "configmap "+res.Held+" marked for deletion", func(ctx context.Context) error {
		cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, res.Held, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.DeletionTimestamp == nil {
			return errors.New("no deletionTimestamp yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	res.Marked = time.Now()
	s.step("wait %s with configmap %s held by %s", DefaultHold, res.Held, HoldFinalizer)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(DefaultHold):
	}
	patch := `{"metadata":{"finalizers":null}}`
	s.step("patch configmap %s type=merge %s", res.Held, patch)
	if _, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Patch(ctx, res.Held, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("remove the finalizer of %s: %w", res.Held, err)
	}
	res.Released = time.Now()
	if err := s.wait(ctx, "namespace "+s.Namespace+" gone", func(ctx context.Context) error {
		_, err := s.Client.CoreV1().Namespaces().Get(ctx, s.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	}); err != nil {
		return nil, err
	}
	res.Gone = time.Now()
	s.step("namespace %s gone (%s after its deletion)", s.Namespace, res.Gone.Sub(res.Deleted).Round(100*time.Millisecond))
	return res, nil
}
