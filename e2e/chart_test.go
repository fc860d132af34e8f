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
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kelemetry/kelemetry/e2e/bins"
	"github.com/kelemetry/kelemetry/e2e/cluster"
)

// The golden render of the Helm chart in mode allinone, release "kelemetry" in namespace
// "kelemetry" (deploy/tools/chart; regenerated there with -update).
const (
	chartGolden    = "../deploy/tools/chart/testdata/golden/allinone.yaml"
	chartNamespace = "kelemetry"
	chartName      = "kelemetry"
	// chartTimeout covers the Event watch's and informers' first lists and the LinkRule status
	// interval (10s).
	chartTimeout = 90 * time.Second
)

// TestHelmChartRBAC applies the chart's rendered all-in-one manifests to the real control plane
// (server-side dry run first, then for real), sees the controllers create the StatefulSet's Pod
// and kwok run it, then runs the all-in-one out of cluster with the chart's configuration and a
// token of the chart's ServiceAccount (TokenRequest), so that the chart's RBAC is all it has.
// Owner linking through the object cache, informer diffs, the Event watch, LinkRule status
// writes and leader election must work with no "forbidden" in its log, even at debug level. Then
// one rule at a time (Events, ConfigMaps) is removed from the ClusterRole and a fresh all-in-one
// must report the failure at Warn, naming the permission.
func TestHelmChartRBAC(t *testing.T) {
	needEnv(t)
	ctx := t.Context()
	objs := readYAML(t, chartGolden)
	if len(objs) < 10 {
		t.Fatalf("%s: only %d objects", chartGolden, len(objs))
	}
	dyn, err := dynamic.NewForConfig(env.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupChart(objs) })

	// No provisioner in the test cluster: a volume bound in advance to the StatefulSet's claim.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "kelemetry-e2e-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/kelemetry-e2e"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: chartNamespace, Name: "data-" + chartName + "-0"},
		},
	}
	if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
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
			ri = dyn.Resource(m.Resource).Namespace(chartNamespace)
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
	// The CRD first, for real: nothing else depends on it, and the all-in-one watches it.
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			if err := apply(o, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, dryRun := range []bool{true, false} {
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if err := apply(o, dryRun); err != nil {
				t.Fatalf("kube-apiserver refuses the chart's manifest: %v", err)
			}
		}
	}
	eventually(t, clusterTimeout, "the StatefulSet's Pod runs", func(ctx context.Context) error {
		p, err := kube.CoreV1().Pods(chartNamespace).Get(ctx, chartName+"-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Spec.ServiceAccountName != chartName {
			return fmt.Errorf("service account %q", p.Spec.ServiceAccountName)
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
		}
		return nil
	})

	// The chart's configuration, run out of cluster with the ServiceAccount's token.
	cfgFile := chartConfig(t, objs)
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

// chartConfig writes the chart's all-in-one configuration, pointed at a kubeconfig with a token
// of the chart's ServiceAccount, and returns its path.
func chartConfig(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var data string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == chartName {
			data, _, _ = unstructured.NestedString(o.Object, "data", "all.yaml")
		}
	}
	if data == "" {
		t.Fatal("the chart's ConfigMap has no all.yaml")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	tok, err := kube.CoreV1().ServiceAccounts(chartNamespace).CreateToken(t.Context(), chartName,
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
	// The pod's paths become the test's; the listeners and data folder come from flags.
	cfg["kubeconfig"] = kcFile
	delete(cfg, "auditAddr")
	delete(cfg, "httpAddr")
	delete(cfg, "dataDir")
	if ev, ok := cfg["event"].(map[string]any); ok {
		delete(ev, "source") // checkpoint in the data folder
	}
	// The webhook of the test cluster feeds the shared all-in-one: this one follows the audit log.
	cfg["audit"] = map[string]any{"follow": []any{env.Cluster.AuditLog}}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("chart configuration run out of cluster:\n%s", out)
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

// cleanupChart deletes what the chart created outside the test's namespace (the CRD stays:
// other tests use it).
func cleanupChart(objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			_ = kube.RbacV1().ClusterRoles().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case "ClusterRoleBinding":
			_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
	}
	_ = kube.CoreV1().Namespaces().Delete(ctx, chartNamespace, metav1.DeleteOptions{})
	_ = kube.CoreV1().PersistentVolumes().Delete(ctx, "kelemetry-e2e-data", metav1.DeleteOptions{})
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
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
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
