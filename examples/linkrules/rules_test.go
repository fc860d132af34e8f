package linkrules_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/linkrule"
)

// fakeLister answers lists from a fixed set of labelled objects.
type fakeLister struct {
	objs  map[schema.GroupVersionResource][]fakeObj
	calls []string
}

type fakeObj struct {
	ns, name string
	labels   labels.Set
}

func (f *fakeLister) List(_ context.Context, cluster string, gvr schema.GroupVersionResource, ns string, sel labels.Selector, limit int) ([]linkrule.NamespacedName, bool, error) {
	f.calls = append(f.calls, cluster+" "+gvr.Resource+" "+ns+" "+sel.String())
	var out []linkrule.NamespacedName
	for _, o := range f.objs[gvr] {
		if (ns == "" || o.ns == ns) && sel.Matches(o.labels) {
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, linkrule.NamespacedName{Namespace: o.ns, Name: o.name})
		}
	}
	return out, false, nil
}

func loadRules(t *testing.T) map[string]*linkrule.Rule {
	t.Helper()
	files, errs, err := linkrule.LoadDir(".")
	require.NoError(t, err)
	require.Empty(t, errs)
	rules := map[string]*linkrule.Rule{}
	for _, f := range files {
		r, err := linkrule.Compile(f.Rule, "file:"+f.Path, linkrule.CompileOptions{})
		require.NoError(t, err, f.Path)
		rules[r.Name] = r
	}
	require.Len(t, rules, 4)
	return rules
}

func object(t *testing.T, group, resource, ns, name string, body string) aggregator.Object {
	t.Helper()
	require.True(t, json.Valid([]byte(body)), body)
	return aggregator.Object{
		ObjectRef: aggregator.ObjectRef{Cluster: "c1", Group: group, Version: "v1", Resource: resource, Namespace: ns, Name: name},
		Body:      json.RawMessage(body),
	}
}

func targets(links []aggregator.Link) []string {
	var out []string
	for _, l := range links {
		out = append(out, string(l.Role)+" "+l.Class+" "+l.Target.String())
	}
	slices.Sort(out)
	return out
}

const podBody = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop","labels":{"app":"web"}},
"spec":{
 "volumes":[
  {"name":"tls","secret":{"secretName":"web-tls"}},
  {"name":"conf","configMap":{"name":"web-conf"}},
  {"name":"kube-api-access","projected":{"sources":[{"serviceAccountToken":{"path":"token"}},{"configMap":{"name":"kube-root-ca.crt"}},{"secret":{"name":"projected-secret"}}]}},
  {"name":"scratch","emptyDir":{}}],
 "imagePullSecrets":[{"name":"registry"}],
 "initContainers":[{"name":"init","envFrom":[{"configMapRef":{"name":"init-env"}}]}],
 "containers":[{"name":"web",
   "env":[{"name":"A","value":"x"},{"name":"PASS","valueFrom":{"secretKeyRef":{"name":"db","key":"pass"}}},{"name":"MODE","valueFrom":{"configMapKeyRef":{"name":"modes","key":"m"}}},{"name":"POD","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
   "envFrom":[{"secretRef":{"name":"web-env"}}]}]}}`

func TestPodSecretsAndConfigMaps(t *testing.T) {
	rules := loadRules(t)
	pod := object(t, "", "pods", "shop", "web-0", podBody)

	links, err := rules["pod-secrets"].Evaluate(t.Context(), pod, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"parent volumes c1//secrets/shop/db",
		"parent volumes c1//secrets/shop/projected-secret",
		"parent volumes c1//secrets/shop/registry",
		"parent volumes c1//secrets/shop/web-env",
		"parent volumes c1//secrets/shop/web-tls",
	}, targets(links))

	links, err = rules["pod-configmaps"].Evaluate(t.Context(), pod, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"parent volumes c1//configmaps/shop/init-env",
		"parent volumes c1//configmaps/shop/modes",
		"parent volumes c1//configmaps/shop/web-conf",
	}, targets(links), "kube-root-ca.crt is left out")

	// A bare Pod: no volumes, no env. No links and no error.
	bare := object(t, "", "pods", "shop", "bare", `{"kind":"Pod","metadata":{"name":"bare"},"spec":{"containers":[{"name":"c"}]}}`)
	for _, name := range []string{"pod-secrets", "pod-configmaps"} {
		links, err := rules[name].Evaluate(t.Context(), bare, nil)
		require.NoError(t, err, name)
		assert.Empty(t, links, name)
	}
	// The rules do not apply to other resources.
	links, err = rules["pod-secrets"].Evaluate(t.Context(), object(t, "apps", "deployments", "shop", "web-0", podBody), nil)
	require.NoError(t, err)
	assert.Empty(t, links)
}

func TestHelmRelease(t *testing.T) {
	rules := loadRules(t)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	lister := &fakeLister{objs: map[schema.GroupVersionResource][]fakeObj{secrets: {
		{ns: "apps", name: "sh.helm.release.v1.shop.v1", labels: labels.Set{"owner": "helm", "name": "shop", "status": "superseded"}},
		{ns: "apps", name: "sh.helm.release.v1.shop.v2", labels: labels.Set{"owner": "helm", "name": "shop", "status": "deployed"}},
		{ns: "apps", name: "sh.helm.release.v1.other.v1", labels: labels.Set{"owner": "helm", "name": "other", "status": "deployed"}},
		{ns: "shop", name: "sh.helm.release.v1.shop.v1", labels: labels.Set{"owner": "helm", "name": "shop", "status": "deployed"}},
	}}}
	deploy := object(t, "apps", "deployments", "shop", "web", `{"kind":"Deployment","metadata":{"name":"web","namespace":"shop",
		"labels":{"app.kubernetes.io/managed-by":"Helm"},
		"annotations":{"meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"apps"}}}`)
	links, err := rules["helm-release"].Evaluate(t.Context(), deploy, lister)
	require.NoError(t, err)
	assert.Equal(t, []string{"parent helm c1//secrets/apps/sh.helm.release.v1.shop.v2"}, targets(links))

	// Not labelled by Helm, or labelled without the annotations: no list at all.
	lister.calls = nil
	for _, body := range []string{
		`{"kind":"ConfigMap","metadata":{"name":"x","annotations":{"meta.helm.sh/release-name":"shop","meta.helm.sh/release-namespace":"apps"}}}`,
		`{"kind":"ConfigMap","metadata":{"name":"x","labels":{"app.kubernetes.io/managed-by":"Helm"}}}`,
	} {
		links, err := rules["helm-release"].Evaluate(t.Context(), object(t, "", "configmaps", "shop", "x", body), lister)
		require.NoError(t, err)
		assert.Empty(t, links)
	}
	assert.Empty(t, lister.calls)
}

func TestServicePods(t *testing.T) {
	rules := loadRules(t)
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	lister := &fakeLister{objs: map[schema.GroupVersionResource][]fakeObj{pods: {
		{ns: "shop", name: "web-0", labels: labels.Set{"app": "web", "tier": "front"}},
		{ns: "shop", name: "web-1", labels: labels.Set{"app": "web"}},
		{ns: "shop", name: "db-0", labels: labels.Set{"app": "db"}},
		{ns: "other", name: "web-0", labels: labels.Set{"app": "web"}},
	}}}
	svc := object(t, "", "services", "shop", "web", `{"kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"selector":{"app":"web"}}}`)
	links, err := rules["service-pods"].Evaluate(t.Context(), svc, lister)
	require.NoError(t, err)
	assert.Equal(t, []string{"child pods c1//pods/shop/web-0", "child pods c1//pods/shop/web-1"}, targets(links))
	assert.Equal(t, []string{"c1 pods shop app=web"}, lister.calls)

	// A Service without a selector (endpoints managed by hand) selects nothing: no list.
	lister.calls = nil
	headless := object(t, "", "services", "shop", "ext", `{"kind":"Service","metadata":{"name":"ext","namespace":"shop"},"spec":{"type":"ExternalName"}}`)
	links, err = rules["service-pods"].Evaluate(t.Context(), headless, lister)
	require.NoError(t, err)
	assert.Empty(t, links)
	assert.Empty(t, lister.calls)
}
