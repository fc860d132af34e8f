package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/e2e/bins"
)

const (
	// previousChart is the chart as released before this one (0.1.0: plain HTTP, no generated
	// credentials), packaged with helm package.
	previousChart = "testdata/charts/kelemetry-0.1.0.tgz"
	chartDir      = "../deploy/helm/kelemetry"
)

// helmCLI runs the helm CLI of the binary cache against the test cluster, with its own cache and
// configuration folders.
type helmCLI struct {
	bin, kubeconfig, home string
}

func newHelm(t *testing.T) *helmCLI {
	t.Helper()
	dir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return &helmCLI{bin: filepath.Join(dir, bins.Helm), kubeconfig: env.Cluster.Kubeconfig, home: t.TempDir()}
}

func (h *helmCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	return h.runCtx(t.Context(), t, args...)
}

func (h *helmCLI) runCtx(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, h.bin, append(args, "--kubeconfig", h.kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"), "HELM_DATA_HOME="+filepath.Join(h.home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestHelmInstallUpgrade installs the previous chart version with the real helm CLI on the
// control plane, in a namespace that enforces Pod Security "restricted", then upgrades it to this
// chart with extraEnv and an Ingress: the StatefulSet rolls to the new pod template (kwok runs
// the pod), the data claim is the same object (same UID, same volume) and still mounted, the
// chart's generated certificate and tokens appear, and a second upgrade keeps them unchanged.
// Uninstalling keeps the claim.
func TestHelmInstallUpgrade(t *testing.T) {
	needEnv(t)
	h := newHelm(t)
	ctx := t.Context()
	// The objects' names are <release>-kelemetry (the release name does not contain the chart's).
	const ns, release, full = "helm-upgrade", "kel", "kel-kelemetry"
	core := kube.CoreV1()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimName := "data-" + full + "-0"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-helm-upgrade-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kelemetry-e2e/helm-upgrade"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claimName},
		},
	}
	if _, err := core.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		defer cancel()
		h.runCtx(c, t, "uninstall", release, "-n", ns, "--ignore-not-found")
		_ = core.Namespaces().Delete(c, ns, metav1.DeleteOptions{})
		_ = core.PersistentVolumes().Delete(c, pv.Name, metav1.DeleteOptions{})
		for _, n := range []string{full} {
			_ = kube.RbacV1().ClusterRoles().Delete(c, n, metav1.DeleteOptions{})
			_ = kube.RbacV1().ClusterRoleBindings().Delete(c, n, metav1.DeleteOptions{})
		}
	})

	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the controllers said, for a failed run.
		evs, err := core.Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, e := range evs.Items {
			t.Logf("event %s/%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	})
	// The LinkRule CRD is cluster-wide and other tests' releases (and the shared environment)
	// install it: this release leaves it to them, as a second release in a real cluster would.
	h.run(t, "install", release, previousChart, "-n", ns, "--set", "cluster="+clusterName, "--set", "linkRules.installCRD=false")
	podRuns := func(what string, check func(p *corev1.Pod) error) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		eventually(t, clusterTimeout, what, func(ctx context.Context) error {
			p, err := core.Pods(ns).Get(ctx, full+"-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s: phase %s", p.Name, p.Status.Phase)
			}
			if err := check(p); err != nil {
				return err
			}
			pod = p
			return nil
		})
		return pod
	}
	podRuns("the previous chart's pod runs", func(*corev1.Pod) error { return nil })
	claim, err := core.PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Spec.VolumeName != pv.Name {
		t.Fatalf("claim %s bound to %q, want %s", claimName, claim.Spec.VolumeName, pv.Name)
	}
	if _, err := core.Secrets(ns).Get(ctx, full+"-api-token", metav1.GetOptions{}); err == nil {
		t.Fatal("the previous chart made an API token: this test's premise is wrong")
	}

	values := filepath.Join(t.TempDir(), "values.yaml")
	mustWrite(t, values, `cluster: `+clusterName+`
linkRules: {installCRD: false}
extraEnv:
  - {name: GOGC, value: "50"}
ingress:
  enabled: true
  hosts:
    - host: kelemetry.example.com
`)
	h.run(t, "upgrade", release, chartDir, "-n", ns, "-f", values)
	sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, full, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if len(c.Env) == 0 || c.Env[0].Name != "GOGC" || c.Env[0].Value != "50" {
		t.Errorf("the upgraded StatefulSet's container env = %v, want GOGC=50 (extraEnv)", c.Env)
	}
	pod := podRuns("the upgraded pod runs", func(p *corev1.Pod) error {
		cur, err := kube.AppsV1().StatefulSets(ns).Get(t.Context(), full, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Status.ObservedGeneration < cur.Generation {
			return fmt.Errorf("the StatefulSet controller has not seen generation %d yet", cur.Generation)
		}
		if rev := p.Labels["controller-revision-hash"]; rev != cur.Status.UpdateRevision {
			return fmt.Errorf("pod of revision %s, want %s", rev, cur.Status.UpdateRevision)
		}
		return nil
	})
	if env := pod.Spec.Containers[0].Env; len(env) == 0 || env[0].Name != "GOGC" {
		t.Errorf("the running pod is not of the upgraded template: env %v", pod.Spec.Containers[0].Env)
	}
	var mounted bool
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claimName {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the upgraded pod does not mount the claim %s: %v", claimName, pod.Spec.Volumes)
	}
	after, err := core.PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != claim.UID || after.Spec.VolumeName != pv.Name {
		t.Errorf("the claim was replaced: UID %s -> %s, volume %s -> %s", claim.UID, after.UID, claim.Spec.VolumeName, after.Spec.VolumeName)
	}
	if _, err := kube.NetworkingV1().Ingresses(ns).Get(ctx, full, metav1.GetOptions{}); err != nil {
		t.Errorf("the Ingress: %v", err)
	}
	var status struct {
		Version int                     `json:"version"`
		Info    struct{ Status string } `json:"info"`
		Chart   struct {
			Metadata struct{ Version string } `json:"metadata"`
		} `json:"chart"`
	}
	if err := json.Unmarshal([]byte(h.run(t, "status", release, "-n", ns, "-o", "json")), &status); err != nil {
		t.Fatal(err)
	}
	if status.Version != 2 || status.Info.Status != "deployed" {
		t.Errorf("helm status: revision %d %s, want 2 deployed", status.Version, status.Info.Status)
	}

	generated := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, name := range []string{full + "-tls", full + "-webhook-token", full + "-api-token"} {
			s, err := core.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the chart's generated Secret %s: %v", name, err)
			}
			for k, v := range s.Data {
				out[name+"/"+k] = string(v)
			}
		}
		return out
	}
	first := generated()
	if len(first) != 5 || len(first[full+"-api-token/tokens"]) != 48 {
		t.Fatalf("generated credentials: %d values, API token of %d characters", len(first), len(first[full+"-api-token/tokens"]))
	}
	h.run(t, "upgrade", release, chartDir, "-n", ns, "-f", values, "--set", "logLevel=debug")
	if second := generated(); !mapsEqual(first, second) {
		t.Error("a second upgrade changed the generated certificate or tokens")
	}

	h.run(t, "uninstall", release, "-n", ns)
	if _, err := core.PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{}); err != nil {
		t.Errorf("the claim after uninstall: %v (it is kept)", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
