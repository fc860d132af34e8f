package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

var (
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	linkRuleGVR = schema.GroupVersionResource{Group: "kelemetry.io", Version: "v1alpha1", Resource: "linkrules"}
)

const (
	tagLinkClass   = "kelemetry.link.class"
	tagLinkCluster = "kelemetry.link.cluster"
	// ruleTimeout covers the all-in-one's watch and its status writes (every 10s by default).
	ruleTimeout = time.Minute
)

// readYAML decodes the documents of a YAML file.
func readYAML(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// applyLinkRuleCRD creates (or updates) the LinkRule CRD this repository ships and waits until
// it is served.
func applyLinkRuleCRD(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	docs := readYAML(t, filepath.Join("..", "deploy", "crds", "kelemetry.io_linkrules.yaml"))
	if len(docs) != 1 {
		t.Fatalf("CRD file: %d documents", len(docs))
	}
	crd := docs[0]
	crds := dyn.Resource(crdGVR)
	_, err := crds.Create(t.Context(), crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := crds.Get(t.Context(), crd.GetName(), metav1.GetOptions{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		crd.SetResourceVersion(cur.GetResourceVersion())
		_, err = crds.Update(t.Context(), crd, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("kube-apiserver rejects the LinkRule CRD: %v", err)
	}
	eventually(t, clusterTimeout, "LinkRule CRD established", func(ctx context.Context) error {
		cur, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				_, err := dyn.Resource(linkRuleGVR).List(ctx, metav1.ListOptions{Limit: 1})
				return err
			}
		}
		return fmt.Errorf("not established: %v", conds)
	})
}

// exampleRules reads the shipped example rules, renamed with suffix and restricted to namespace
// ns so that they do not touch the other scenarios' objects.
func exampleRules(t *testing.T, ns, suffix string) map[string]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", "linkrules", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("example rules: %v %v", files, err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		for _, r := range readYAML(t, f) {
			name := r.GetName()
			r.SetName(name + "-" + suffix)
			if err := unstructured.SetNestedStringSlice(r.Object, []string{ns}, "spec", "source", "namespaces"); err != nil {
				t.Fatal(err)
			}
			out[name] = r
		}
	}
	return out
}

// ruleStatus returns the status of a LinkRule object.
type ruleStatus struct {
	generation, observed, linksMade int64
	ready, reason, message          string
}

func getRuleStatus(ctx context.Context, dyn dynamic.Interface, name string) (ruleStatus, error) {
	u, err := dyn.Resource(linkRuleGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ruleStatus{}, err
	}
	st := ruleStatus{generation: u.GetGeneration()}
	st.observed, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	st.linksMade, _, _ = unstructured.NestedInt64(u.Object, "status", "linksMade")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			st.ready, _ = m["status"].(string)
			st.reason, _ = m["reason"].(string)
			st.message, _ = m["message"].(string)
		}
	}
	return st, nil
}

// waitRuleReady waits until the all-in-one reports the rule's current generation as applied.
func waitRuleReady(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	eventually(t, ruleTimeout, "LinkRule "+name+" Ready", func(ctx context.Context) error {
		st, err := getRuleStatus(ctx, dyn, name)
		if err != nil {
			return err
		}
		if st.observed != st.generation || st.ready != "True" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

// linkClasses returns the classes of o's link spans to one resource.
func linkClasses(o kapi.ObjectTraces, role, resource string) []string {
	var out []string
	for _, s := range o.Spans(kapi.KindLink) {
		if s.Tag(kapi.TagLinkRole) == role && s.Tag(kapi.TagLinkResource) == resource {
			out = append(out, s.Tag(tagLinkClass))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func podMounting(name string, labels, annotations map[string]string, secret, configMap string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "app",
				Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Key: "mode"}}}},
			}},
		},
	}
}

// TestLinkRule applies the LinkRule CRD and the example rules to the test cluster, where the
// shared all-in-one watches them: a Pod mounting a Secret shows under the Secret's trace, a
// Service's trace holds the Pods it selects, a changed rule applies to new objects, and a rule
// that does not compile is reported in its status. A second all-in-one, with rules from a
// directory and the cluster registered a second time under another name, links a Service to
// Pods resolved through the other cluster's client.
func TestLinkRule(t *testing.T) {
	needEnv(t)
	start := time.Now()
	dyn, err := dynamic.NewForConfig(env.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	applyLinkRuleCRD(t, dyn)
	ns := newNamespace(t, "linkrule")
	rules := dyn.Resource(linkRuleGVR)
	examples := exampleRules(t, ns, ns)
	for _, r := range examples {
		if _, err := rules.Create(t.Context(), r, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kube-apiserver rejects example rule %s: %v", r.GetName(), err)
		}
		name := r.GetName()
		t.Cleanup(func() { _ = rules.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	for _, r := range examples {
		waitRuleReady(t, dyn, r.GetName())
	}
	tReady := time.Since(start)

	// The CRD's schema rejects a malformed rule outright.
	bad := examples["pod-secrets"].DeepCopy()
	bad.SetName("bad-" + ns)
	unstructured.RemoveNestedField(bad.Object, "spec", "targets")
	if _, err := rules.Create(t.Context(), bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("a rule without targets: got %v, want Invalid", err)
	}

	// A Pod mounting a Secret and reading a ConfigMap; a Service selecting it.
	ctx := t.Context()
	core := kube.CoreV1()
	if _, err := core.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-tls"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-conf"}, Data: map[string]string{"mode": "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Pods(ns).Create(ctx, podMounting("web-0", map[string]string{"app": "web"}, nil, "web-tls", "web-conf"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	traces(t, kapi.Query{Resource: "secrets", Namespace: ns, Name: "web-tls"}, "the Secret's trace holds the Pod under it", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleChild, "pods"), []string{"web-0"}); err != nil {
			return err
		}
		return sameSet(linkClasses(o, kapi.RoleChild, "pods"), []string{"volumes"})
	})
	traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: "web-0"}, "the Pod's trace holds its Secret and ConfigMap", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "secrets"), []string{"web-tls"}); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		return sameSet(o.LinksTo(kapi.RoleParent, "configmaps"), []string{"web-conf"})
	})
	traces(t, kapi.Query{Resource: "configmaps", Namespace: ns, Name: "web-conf"}, "the ConfigMap's trace holds the Pod", func(o kapi.ObjectTraces) error {
		return sameSet(o.LinksTo(kapi.RoleChild, "pods"), []string{"web-0"})
	})
	traces(t, kapi.Query{Resource: "services", Namespace: ns, Name: "web"}, "the Service's trace holds the Pods it selects", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleChild, "pods"), []string{"web-0"}); err != nil {
			return err
		}
		return sameSet(linkClasses(o, kapi.RoleChild, "pods"), []string{"pods"})
	})
	secretsRule := examples["pod-secrets"].GetName()
	eventually(t, ruleTimeout, "the rule's status counts its links", func(ctx context.Context) error {
		st, err := getRuleStatus(ctx, dyn, secretsRule)
		if err != nil {
			return err
		}
		if st.linksMade < 1 {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	tLinked := time.Since(start)

	// Change the rule: the Secret is now named by an annotation. New objects follow the new rule.
	cur, err := rules.Get(ctx, secretsRule, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	targets, _, _ := unstructured.NestedSlice(cur.Object, "spec", "targets")
	targets[0].(map[string]any)["name"] = "object.metadata.?annotations['e2e.kelemetry.io/secret'].orValue('')"
	if err := unstructured.SetNestedSlice(cur.Object, targets, "spec", "targets"); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRuleReady(t, dyn, secretsRule)
	if _, err := core.Pods(ns).Create(ctx, podMounting("web-1", map[string]string{"app": "other"},
		map[string]string{"e2e.kelemetry.io/secret": "annotated"}, "web-tls", "web-conf"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	traces(t, kapi.Query{Resource: "pods", Namespace: ns, Name: "web-1"}, "the changed rule applies to a new Pod", func(o kapi.ObjectTraces) error {
		if err := sameSet(o.LinksTo(kapi.RoleParent, "secrets"), []string{"annotated"}); err != nil {
			return fmt.Errorf("secrets: %w", err)
		}
		return sameSet(o.LinksTo(kapi.RoleParent, "configmaps"), []string{"web-conf"})
	})

	// A rule whose expression does not compile: rejected with a message, the others unaffected.
	broken := examples["pod-secrets"].DeepCopy()
	broken.SetName("broken-" + ns)
	bt, _, _ := unstructured.NestedSlice(broken.Object, "spec", "targets")
	bt[0].(map[string]any)["name"] = "object.spec.volumes.map(v, v.secret.secretName"
	if err := unstructured.SetNestedSlice(broken.Object, bt, "spec", "targets"); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Create(ctx, broken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rules.Delete(context.Background(), broken.GetName(), metav1.DeleteOptions{}) })
	eventually(t, ruleTimeout, "the broken rule's status says why", func(ctx context.Context) error {
		st, err := getRuleStatus(ctx, dyn, broken.GetName())
		if err != nil {
			return err
		}
		if st.ready != "False" || st.reason != "CompileFailed" || !strings.Contains(st.message, "spec.targets[0].name: compile") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	waitRuleReady(t, dyn, secretsRule)
	tChanged := time.Since(start)

	crossCluster(t, ns)
	logTimings(t, start, "rules ready", tReady.Round(time.Millisecond), "linked", tLinked.Round(time.Millisecond),
		"changed", tChanged.Round(time.Millisecond))
}

// crossCluster starts a second all-in-one that follows the test cluster's audit log, knows the
// cluster under a second name, "other", and reads its rules from a directory: a Service in
// "test" is linked to the Pods it selects, listed through the client of "other".
func crossCluster(t *testing.T, ns string) {
	t.Helper()
	dir := t.TempDir()
	rule := fmt.Sprintf(`apiVersion: kelemetry.io/v1alpha1
kind: LinkRule
metadata:
  name: cross-cluster
spec:
  source:
    resources: [{group: "", resource: services}]
    namespaces: [%q]
    condition: object.metadata.name == 'front'
  role: child
  class: remote-pods
  targets:
    - cluster: other
      group: ""
      version: v1
      resource: pods
      selector: object.spec.selector
`, ns)
	if err := os.WriteFile(filepath.Join(dir, "cross.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	aio, err := cluster.StartAllInOne(t.Context(), cluster.AllInOneOptions{
		BinDir:     binDir,
		Cluster:    clusterName,
		Kubeconfig: env.Cluster.Kubeconfig,
		LogFile:    filepath.Join(env.WorkDir, "kelemetry-crosscluster.log"),
		ExtraArgs: []string{
			"--cluster-kubeconfig=other=" + env.Cluster.Kubeconfig,
			"--follow=" + env.Cluster.AuditLog,
			"--link-rules=" + dir,
			"--link-rules-watch=false",
			"--event-watch=false",
			"--diff-informer=false",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = aio.Stop() })
	api2 := kapi.New(aio.URL)

	ctx := t.Context()
	core := kube.CoreV1()
	if _, err := core.Pods(ns).Create(ctx, podMounting("back-0", map[string]string{"app": "back"}, nil, "web-tls", "web-conf"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "front"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "back"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objTraces := func(what string, q kapi.Query, check func(o kapi.ObjectTraces) error) {
		t.Helper()
		eventually(t, kelemetryTimeout, what, func(ctx context.Context) error {
			if err := aio.Exited(); err != nil {
				t.Fatal(err)
			}
			o, err := api2.ObjectTraces(ctx, q)
			if err != nil {
				return err
			}
			if err := checkObjectSpans(o); err != nil {
				return err
			}
			return check(o)
		})
	}
	objTraces("the Service's trace in cluster test holds the Pod of cluster other",
		kapi.Query{Cluster: clusterName, Resource: "services", Namespace: ns, Name: "front"}, func(o kapi.ObjectTraces) error {
			if err := sameSet(o.LinksTo(kapi.RoleChild, "pods"), []string{"back-0"}); err != nil {
				return err
			}
			for _, s := range o.Spans(kapi.KindLink) {
				if s.Tag(kapi.TagLinkResource) == "pods" && s.Tag(tagLinkCluster) != "other" {
					return fmt.Errorf("link to %s in cluster %q, want other", s.Tag(kapi.TagLinkName), s.Tag(tagLinkCluster))
				}
			}
			return nil
		})
	objTraces("the Pod's trace in cluster other holds the Service of cluster test",
		kapi.Query{Cluster: "other", Resource: "pods", Namespace: ns, Name: "back-0"}, func(o kapi.ObjectTraces) error {
			if err := sameSet(o.LinksTo(kapi.RoleParent, "services"), []string{"front"}); err != nil {
				return err
			}
			for _, s := range o.Spans(kapi.KindLink) {
				if s.Tag(kapi.TagLinkResource) == "services" && s.Tag(tagLinkCluster) != clusterName {
					return fmt.Errorf("link to %s in cluster %q, want %s", s.Tag(kapi.TagLinkName), s.Tag(tagLinkCluster), clusterName)
				}
			}
			return nil
		})
}
