package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
	"github.com/kelemetry/kelemetry/e2e/jaegerproc"
	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// The golden renders of the Helm chart (deploy/tools/chart; regenerated there with -update), each
// its own release in a namespace of its name, applied side by side.
const (
	chartGolden    = "../deploy/tools/chart/testdata/golden/allinone.yaml"
	chartNamespace = "kelemetry"
	chartName      = "kelemetry"
	// chartTimeout covers the Event watch's and informers' first lists and the LinkRule status
	// interval (10s).
	chartTimeout = 90 * time.Second
)

// chartRelease is one golden render: its release name (the full name of its objects) is its
// namespace too.
type chartRelease struct {
	golden, name string
	objs         []*unstructured.Unstructured
}

var chartReleases = []chartRelease{
	{golden: chartGolden, name: chartName},
	// NetworkPolicy, ServiceMonitor, PrometheusRule, dashboard ConfigMaps, TLS and token Secrets (the pods are created without them:
	// kwok mounts nothing).
	{golden: "../deploy/tools/chart/testdata/golden/allinone-secured.yaml", name: "kelemetry-secured"},
	// ingest, query and events Deployments, the Event checkpoint ConfigMap's Role.
	{golden: "../deploy/tools/chart/testdata/golden/scaled.yaml", name: "kelemetry-scaled"},
	// The managed-cluster mode: an audit collector container beside Kelemetry, a shared emptyDir.
	{golden: "../deploy/tools/chart/testdata/golden/allinone-managed.yaml", name: "kelemetry-managed"},
	// The managed-cluster mode over OTLP logs: the OTLP receiver with the webhook's TLS and token.
	{golden: "../deploy/tools/chart/testdata/golden/allinone-managed-otlp.yaml", name: "kelemetry-otlp"},
}

// monitoringCRD is the smallest CRD serving the Prometheus operator's kind (ServiceMonitor,
// PrometheusRule) in monitoring.coreos.com/v1, for the renders that use it when the operator's
// CRDs are not installed.
func monitoringCRD(kind string) map[string]any {
	singular := strings.ToLower(kind)
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": singular + "s.monitoring.coreos.com"},
		"spec": map[string]any{
			"group": "monitoring.coreos.com", "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": singular + "s", "singular": singular},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
}

// TestHelmChartRBAC applies the chart's rendered manifests to the real control plane, each mode
// (allinone; allinone with TLS, tokens, NetworkPolicy and ServiceMonitor; scaled) its own release
// (server-side dry run first, then for real), and sees the controllers create the StatefulSets'
// and Deployments' Pods and kwok run them. Then it runs the all-in-one out of cluster with the
// chart's configuration and a token of the chart's ServiceAccount (TokenRequest), so that the
// chart's RBAC is all it has. Owner linking through the object cache (the links are in the stored
// traces), informer diffs, the Event watch, LinkRule status writes and leader election must work
// with no "forbidden" in its log, even at debug level. The scaled render's events role runs the
// same way with its own ServiceAccount: the Event checkpoint ConfigMap is created and updated.
// Then one rule at a time (Events, ConfigMaps) is removed from the ClusterRole and a fresh
// all-in-one must report the failure at Warn, naming the permission.
func TestHelmChartRBAC(t *testing.T) {
	needEnv(t)
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(env.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	rels := make([]chartRelease, len(chartReleases))
	for i, r := range chartReleases {
		r.objs = readYAML(t, r.golden)
		if len(r.objs) < 10 {
			t.Fatalf("%s: only %d objects", r.golden, len(r.objs))
		}
		rels[i] = r
		applyChart(t, dyn, mapper, r)
	}
	for _, r := range rels {
		checkChartPods(t, r)
	}
	// The chart's configuration, run out of cluster with the ServiceAccount's token.
	cfgFile := chartConfig(t, rels[0], "all", func(cfg map[string]any) {
		if ev, ok := cfg["event"].(map[string]any); ok {
			delete(ev, "source") // checkpoint in the data folder
		}
		// The webhook of the test cluster feeds the shared all-in-one: this one follows the audit log.
		cfg["audit"] = map[string]any{"follow": []any{env.Cluster.AuditLog}}
	})
	a := startChartAllInOne(t, cfgFile, "granted")

	ns := newNamespace(t, "chart")
	labels := map[string]string{"app": "chart-e2e"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A write through the scale subresource: its audit body is a Scale, not the Deployment, so
	// the linkers fetch the Deployment through the object cache.
	eventually(t, clusterTimeout, "scale the Deployment", func(ctx context.Context) error {
		sc, err := kube.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		sc.Spec.Replicas = 3
		_, err = kube.AppsV1().Deployments(ns).UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
		return err
	})
	rule := exampleRules(t, ns, ns)["service-pods"]
	if rule == nil {
		t.Fatal("example rule service-pods not found")
	}
	if _, err := dyn.Resource(linkRuleGVR).Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(linkRuleGVR).Delete(context.Background(), rule.GetName(), metav1.DeleteOptions{})
	})

	sa := "system:serviceaccount:" + chartNamespace + ":" + chartName
	eventually(t, chartTimeout, "leader election: the Lease in the release namespace is held", func(ctx context.Context) error {
		l, err := kube.CoordinationV1().Leases(chartNamespace).Get(ctx, "kelemetry-diff-informer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		return nil
	})
	eventually(t, chartTimeout, "informer diffs, the Event watch and owner linking work", func(ctx context.Context) error {
		m, err := scrape(ctx, a.URL+"/metrics")
		if err != nil {
			return err
		}
		for _, want := range []struct{ metric, result string }{
			{"kelemetry_diff_informer_events", "creation"},
			{"kelemetry_event_source_events", "sent"},
			{"kelemetry_objectcache_requests", "fetched"},
		} {
			if m[want.metric+"|"+want.result] == 0 {
				return fmt.Errorf("%s{result=%q} is 0 (seen: %v)", want.metric, want.result, m)
			}
		}
		return nil
	})
	// Owner linking lands in the stored traces: the Deployment's trace holds its scale write (its
	// audit body is a Scale: the Deployment came through the object cache) and a child link to
	// each of its ReplicaSets, whose traces link it back as parent and their Pods as children,
	// and each Pod's trace its ReplicaSet as parent.
	kc := kapi.New(a.URL)
	eventually(t, chartTimeout, "owner links in the stored traces", func(ctx context.Context) error {
		rss, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=chart-e2e"})
		if err != nil {
			return err
		}
		var rsNames []string
		for _, rs := range rss.Items {
			if c := metav1.GetControllerOf(&rs); c != nil && c.Kind == "Deployment" && c.Name == "web" {
				rsNames = append(rsNames, rs.Name)
			}
		}
		if len(rsNames) == 0 {
			return errors.New("no ReplicaSet of the Deployment yet")
		}
		d, err := kc.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Group: "apps", Resource: "deployments", Namespace: ns, Name: "web"})
		if err != nil {
			return err
		}
		if !d.HasEvent("*", "update", "scale") {
			return errors.New("the Deployment's trace has no scale update")
		}
		if err := sameSet(d.LinksTo(kapi.RoleChild, "replicasets"), rsNames); err != nil {
			return fmt.Errorf("the Deployment's child ReplicaSets: %w", err)
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=chart-e2e"})
		if err != nil {
			return err
		}
		podsOf := map[string][]string{}
		for _, p := range pods.Items {
			if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "ReplicaSet" {
				podsOf[c.Name] = append(podsOf[c.Name], p.Name)
				o, err := kc.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Resource: "pods", Namespace: ns, Name: p.Name})
				if err != nil {
					return err
				}
				if err := sameSet(o.LinksTo(kapi.RoleParent, "replicasets"), []string{c.Name}); err != nil {
					return fmt.Errorf("pod %s's parent: %w", p.Name, err)
				}
			}
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods, want 3", len(pods.Items))
		}
		for _, rs := range rsNames {
			o, err := kc.ObjectTraces(ctx, kapi.Query{Cluster: clusterName, Group: "apps", Resource: "replicasets", Namespace: ns, Name: rs})
			if err != nil {
				return err
			}
			if err := sameSet(o.LinksTo(kapi.RoleParent, "deployments"), []string{"web"}); err != nil {
				return fmt.Errorf("ReplicaSet %s's parent: %w", rs, err)
			}
			if err := sameSet(o.LinksTo(kapi.RoleChild, "pods"), podsOf[rs]); err != nil {
				return fmt.Errorf("ReplicaSet %s's Pods: %w", rs, err)
			}
		}
		return nil
	})
	eventually(t, chartTimeout, "the LinkRule's status is written with the ServiceAccount", func(ctx context.Context) error {
		return findAudit(env.Cluster.AuditLog, func(e auditLine) bool {
			return e.User.Username == sa && e.ObjectRef.Resource == "linkrules" && e.ObjectRef.Subresource == "status" &&
				e.ObjectRef.Name == rule.GetName() && e.ResponseStatus.Code < 300
		})
	})
	if st, err := getRuleStatus(ctx, dyn, rule.GetName()); err != nil || st.ready != "True" {
		t.Errorf("LinkRule status %+v, %v", st, err)
	}
	if err := a.Exited(); err != nil {
		t.Fatal(err)
	}
	if lines := grepLog(t, a.LogFile, regexp.MustCompile(`(?i)forbidden`)); len(lines) > 0 {
		t.Errorf("the chart's RBAC is not enough: %d forbidden lines, first: %s", len(lines), lines[0])
	}
	if err := a.Stop(); err != nil {
		t.Error(err)
	}

	checkEventsRole(t, rels[2])

	// One rule less: the part that needs it fails and the all-in-one says so, naming the
	// permission: the Event watch's list, and a linker's fetch through the object cache.
	orig, err := kube.RbacV1().ClusterRoles().Get(ctx, chartName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		resource string
		want     *regexp.Regexp
	}{
		{"events", regexp.MustCompile(`level=WARN msg="list events" .*error="list events: events is forbidden: User \\"` +
			regexp.QuoteMeta(sa) + `\\" cannot list resource \\"events\\"`)},
		{"configmaps", regexp.MustCompile(`level=WARN msg="object cache: permission denied; grant get on this resource to the identity of the cluster's kubeconfig" .*resource=configmaps .*cannot get resource \\"configmaps\\"`)},
	} {
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, chartName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cr.Rules = nil
		for _, r := range orig.Rules {
			if len(r.Resources) == 1 && r.Resources[0] == c.resource {
				continue
			}
			cr.Rules = append(cr.Rules, r)
		}
		if len(cr.Rules) != len(orig.Rules)-1 {
			t.Fatalf("no single %s rule in the ClusterRole: %+v", c.resource, orig.Rules)
		}
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		b := startChartAllInOne(t, cfgFile, "without-"+c.resource)
		pollUntil(t, chartTimeout, "the missing permission on "+c.resource+" is reported", b.Exited, func(context.Context) error {
			if lines := grepLog(t, b.LogFile, c.want); len(lines) == 0 {
				return fmt.Errorf("no line matching %s in %s", c.want, b.LogFile)
			}
			return nil
		})
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	}
}

// checkEventsRole runs the scaled render's events role out of cluster with a token of that
// release's ServiceAccount (and a Jaeger for its store): the Event watch keeps its position in the
// checkpoint ConfigMap its Role names, which must be created, then read and updated, with no
// "forbidden" in the log.
func checkEventsRole(t *testing.T, r chartRelease) {
	t.Helper()
	ctx := t.Context()
	jb := jaegerproc.StartT(t, jaegerproc.Options{Mode: jaegerproc.ModeBackend})
	cfgFile := chartConfig(t, r, "events", func(cfg map[string]any) {
		if src, _, _ := unstructured.NestedString(cfg, "event", "source", "checkpointConfigMap"); src != r.name+"/"+r.name+"-event-checkpoint" {
			t.Fatalf("events role: checkpointConfigMap %q", src)
		}
		cfg["jaeger"] = map[string]any{"endpoint": jb.RemoteStorageAddr, "otlp": map[string]any{"endpoint": "grpc://" + jb.OTLPAddr}}
	})
	ev := startChartAllInOne(t, cfgFile, r.name+"-events")
	cmName := r.name + "-event-checkpoint"
	sa := "system:serviceaccount:" + r.name + ":" + r.name
	checkpoint := func(ctx context.Context) (string, error) {
		cm, err := kube.CoreV1().ConfigMaps(r.name).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if cm.Data["checkpoint.json"] == "" {
			return "", fmt.Errorf("ConfigMap %s: no checkpoint.json: %v", cmName, cm.Data)
		}
		return cm.Data["checkpoint.json"], nil
	}
	wrote := func(verb string, code int) func(ctx context.Context) error {
		return func(context.Context) error {
			if err := ev.Exited(); err != nil {
				t.Fatal(err)
			}
			return findAudit(env.Cluster.AuditLog, func(e auditLine) bool {
				return e.User.Username == sa && e.Verb == verb && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == r.name &&
					(e.ObjectRef.Name == cmName || e.ObjectRef.Name == "" && verb == "create") && e.ResponseStatus.Code == code
			})
		}
	}
	eventually(t, chartTimeout, "the events role creates its checkpoint ConfigMap", func(ctx context.Context) error {
		if _, err := checkpoint(ctx); err != nil {
			return err
		}
		return wrote("create", http.StatusCreated)(ctx)
	})
	// A new Event (about an object the ClusterRole lets the linkers read) moves the checkpoint:
	// the ConfigMap is read and updated.
	e, err := kube.CoreV1().Events(r.name).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "chart-e2e-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: r.name, Name: r.name + "-events", APIVersion: "apps/v1"},
		Reason:         "ChartE2E", Message: "moves the events role's checkpoint", Type: corev1.EventTypeNormal,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
		Source: corev1.EventSource{Component: "e2e"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, chartTimeout, "the events role updates its checkpoint with a new Event", func(ctx context.Context) error {
		cp, err := checkpoint(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(cp, string(e.UID)) {
			return fmt.Errorf("Event %s not in the checkpoint yet", e.UID)
		}
		// Save reads the ConfigMap before the update (the test cluster does not audit reads).
		return wrote("update", http.StatusOK)(ctx)
	})
	if m, err := scrape(ctx, ev.URL+"/metrics"); err != nil {
		t.Error(err)
	} else if m["kelemetry_event_source_events|sent"] == 0 {
		t.Errorf("the events role sent no Event: %v", m)
	}
	if lines := grepLog(t, ev.LogFile, regexp.MustCompile(`(?i)forbidden`)); len(lines) > 0 {
		t.Errorf("the scaled chart's RBAC is not enough for the events role: %d forbidden lines, first: %s", len(lines), lines[0])
	}
	if err := ev.Stop(); err != nil {
		t.Error(err)
	}
}

// applyChart applies one render in its namespace: the CRDs first, for real, then everything with
// a server-side dry run, then for real. A StatefulSet's claim gets a volume bound in advance (no
// provisioner in the test cluster); a ServiceMonitor, the minimal CRD when none is installed.
func applyChart(t *testing.T, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, r chartRelease) {
	t.Helper()
	ctx := t.Context()
	// Pod Security "restricted" is enforced in the namespace: kube-apiserver refuses a pod of the
	// chart that needs more (a hostPath, root, a capability), and its controller never gets it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChart(r) })
	apply := func(o *unstructured.Unstructured, dryRun bool) error {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset()
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
			}
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(r.name)
		}
		opts := metav1.ApplyOptions{FieldManager: "helm", Force: true}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, opts); err != nil {
			return fmt.Errorf("%s %s (dry run %v): %w", gvk.Kind, o.GetName(), dryRun, err)
		}
		return nil
	}
	crds := []*unstructured.Unstructured{}
	for _, o := range r.objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o)
		case "ServiceMonitor", "PrometheusRule":
			if _, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version); err == nil {
				continue
			}
			crd := &unstructured.Unstructured{Object: monitoringCRD(o.GetKind())}
			if _, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				t.Log("no " + o.GetKind() + " CRD: installing a minimal one for the test")
				crds = append(crds, crd)
				t.Cleanup(func() {
					_ = dyn.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
				})
			}
		case "StatefulSet":
			claims, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumeClaimTemplates")
			if len(claims) != 1 {
				t.Fatalf("StatefulSet %s: %d claim templates", o.GetName(), len(claims))
			}
			claim, _, _ := unstructured.NestedString(claims[0].(map[string]any), "metadata", "name")
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + r.name + "-data"},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kelemetry-e2e/" + r.name}},
					ClaimRef:               &corev1.ObjectReference{Namespace: r.name, Name: claim + "-" + o.GetName() + "-0"},
				},
			}
			if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	for _, crd := range crds {
		if err := apply(crd, false); err != nil {
			t.Fatal(err)
		}
		eventually(t, clusterTimeout, "CRD "+crd.GetName()+" established", func(ctx context.Context) error {
			cur, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established: %v", conds)
		})
	}
	mapper.Reset()
	for _, dryRun := range []bool{true, false} {
		for _, o := range r.objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if err := apply(o, dryRun); err != nil {
				t.Fatalf("kube-apiserver refuses the chart's manifest %s: %v", r.golden, err)
			}
		}
	}
}

// checkChartPods waits until the controllers created every Pod of the render's StatefulSets and
// Deployments, with the release's ServiceAccount, and kwok runs them.
func checkChartPods(t *testing.T, r chartRelease) {
	t.Helper()
	workloads := 0
	for _, o := range r.objs {
		if o.GetKind() != "StatefulSet" && o.GetKind() != "Deployment" {
			continue
		}
		workloads++
		v, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas")
		var replicas int64
		switch v := v.(type) {
		case int64:
			replicas = v
		case float64: // readYAML decodes through JSON
			replicas = int64(v)
		}
		if replicas < 1 {
			t.Fatalf("%s %s: replicas %v", o.GetKind(), o.GetName(), v)
		}
		sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		what := fmt.Sprintf("the %d Pods of %s %s/%s run", replicas, o.GetKind(), r.name, o.GetName())
		eventually(t, clusterTimeout, what, func(ctx context.Context) error {
			pods, err := kube.CoreV1().Pods(r.name).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
			if err != nil {
				return err
			}
			if int64(len(pods.Items)) != replicas {
				return fmt.Errorf("%d pods", len(pods.Items))
			}
			for _, p := range pods.Items {
				if p.Spec.ServiceAccountName != r.name {
					return fmt.Errorf("pod %s: service account %q", p.Name, p.Spec.ServiceAccountName)
				}
				if p.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("pod %s: phase %s, conditions %v", p.Name, p.Status.Phase, p.Status.Conditions)
				}
			}
			return nil
		})
	}
	if workloads == 0 {
		t.Fatalf("%s: no StatefulSet or Deployment", r.golden)
	}
}

// chartConfig writes the configuration of one role of a render ("all", or scaled's "ingest",
// "query", "events"), pointed at a kubeconfig with a token of the release's ServiceAccount, with
// edit applied, and returns its path. The listeners and data folder come from flags.
func chartConfig(t *testing.T, r chartRelease, role string, edit func(cfg map[string]any)) string {
	t.Helper()
	var data string
	for _, o := range r.objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == r.name {
			data, _, _ = unstructured.NestedString(o.Object, "data", role+".yaml")
		}
	}
	if data == "" {
		t.Fatalf("the chart's ConfigMap %s has no %s.yaml", r.name, role)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	tok, err := kube.CoreV1().ServiceAccounts(r.name).CreateToken(t.Context(), r.name,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Cluster.Server, CertificateAuthority: env.Cluster.Config.CAFile,
		CertificateAuthorityData: env.Cluster.Config.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "sa"}
	kc.CurrentContext = "test"
	kcFile := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcFile); err != nil {
		t.Fatal(err)
	}
	// The pod's paths become the test's; the listeners' TLS and tokens (files of the pod's
	// Secrets) are left out: the test reaches the all-in-one over plain HTTP, and
	// webhook_tls_test.go covers TLS and authentication.
	cfg["kubeconfig"] = kcFile
	for _, k := range []string{"auditAddr", "httpAddr", "dataDir", "auditTLS", "httpTLS", "auditAuth", "httpAuth"} {
		delete(cfg, k)
	}
	edit(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("chart configuration %s/%s run out of cluster:\n%s", r.name, role, out)
	return p
}

func startChartAllInOne(t *testing.T, cfgFile, name string) *cluster.AllInOne {
	t.Helper()
	binDir, err := bins.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(env.WorkDir, "chart-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, err := cluster.StartAllInOne(t.Context(), cluster.AllInOneOptions{
		BinDir: binDir, Cluster: clusterName, DataDir: filepath.Join(dir, "data"), LogLevel: "debug",
		LogFile: filepath.Join(dir, "kelemetry.log"), ExtraArgs: []string{"--config=" + cfgFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	return a
}

// cleanupChart deletes what a render created outside the test's namespaces and its namespace
// (the LinkRule CRD stays: other tests use it).
func cleanupChart(r chartRelease) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range r.objs {
		switch o.GetKind() {
		case "ClusterRole":
			_ = kube.RbacV1().ClusterRoles().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case "ClusterRoleBinding":
			_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
	}
	_ = kube.CoreV1().Namespaces().Delete(ctx, r.name, metav1.DeleteOptions{})
	_ = kube.CoreV1().PersistentVolumes().Delete(ctx, "e2e-"+r.name+"-data", metav1.DeleteOptions{})
}

// scrape reads counters from a Prometheus text page: "name|result" -> sum over other labels.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	line := regexp.MustCompile(`^([a-z_]+?)(?:_total)?\{(.*)\} ([0-9.e+]+)$`)
	result := regexp.MustCompile(`result="([^"]*)"`)
	out := map[string]float64{}
	for _, l := range strings.Split(string(body), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r := result.FindStringSubmatch(m[2])
		if r == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		out[m[1]+"|"+r[1]] += v
	}
	return out, nil
}

// auditLine is the part of a kube-apiserver audit event the test reads.
type auditLine struct {
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	Verb      string `json:"verb"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// findAudit returns nil when a line of the audit log matches.
func findAudit(path string, match func(auditLine) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var e auditLine
		if json.Unmarshal(sc.Bytes(), &e) == nil && match(e) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("no matching audit event yet")
}

func grepLog(t *testing.T, path string, re *regexp.Regexp) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}
