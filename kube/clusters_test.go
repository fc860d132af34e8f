package kube_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/kubetest"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/telemetry"
)

// fakeAPIServer serves discovery documents (aggregated or legacy) and pod GETs.
type fakeAPIServer struct {
	aggregated bool
	mu         sync.Mutex
	requests   []string // method path?query
	agents     []string
}

const (
	aggregatedCore = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[
 {"metadata":{"creationTimestamp":null},"versions":[{"version":"v1","freshness":"Current","resources":[
  {"resource":"pods","responseKind":{"group":"","version":"","kind":"Pod"},"scope":"Namespaced","singularResource":"pod","verbs":["get"],
   "subresources":[{"subresource":"status","responseKind":{"group":"","version":"","kind":"Pod"},"verbs":["get"]}]},
  {"resource":"nodes","responseKind":{"group":"","version":"","kind":"Node"},"scope":"Cluster","singularResource":"node","verbs":["get"]}]}]}]}`
	aggregatedGroups = `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[
 {"metadata":{"name":"apps","creationTimestamp":null},"versions":[{"version":"v1","freshness":"Current","resources":[
  {"resource":"deployments","responseKind":{"group":"","version":"","kind":"Deployment"},"scope":"Namespaced","verbs":["get"]}]}]},
 {"metadata":{"name":"metrics.k8s.io","creationTimestamp":null},"versions":[{"version":"v1beta1","freshness":"Stale"}]}]}`
	legacyCore       = `{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}`
	legacyCoreV1     = `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get"]},{"name":"pods/status","singularName":"","namespaced":true,"kind":"Pod","verbs":["get"]},{"name":"nodes","singularName":"node","namespaced":false,"kind":"Node","verbs":["get"]}]}`
	legacyGroups     = `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}},{"name":"metrics.k8s.io","versions":[{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"metrics.k8s.io/v1beta1","version":"v1beta1"}}]}`
	legacyAppsV1     = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[{"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","verbs":["get"]}]}`
	notFoundStatus   = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"gone\" not found","reason":"NotFound","details":{"name":"gone","kind":"pods"},"code":404}`
	webPodWithStatus = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web","namespace":"default","uid":"u1","managedFields":[{"manager":"x"}],"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u2","controller":true}]},"spec":{},"status":{"phase":"Running"}}`
)

func (s *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	s.agents = append(s.agents, r.UserAgent())
	s.mu.Unlock()
	aggregated := s.aggregated && strings.Contains(r.Header.Get("Accept"), "as=APIGroupDiscoveryList")
	reply := func(code int, body string) {
		if strings.Contains(body, `"APIGroupDiscoveryList"`) {
			w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
	switch {
	case r.URL.Path == "/api" && aggregated:
		reply(http.StatusOK, aggregatedCore)
	case r.URL.Path == "/apis" && aggregated:
		reply(http.StatusOK, aggregatedGroups)
	case r.URL.Path == "/api":
		reply(http.StatusOK, legacyCore)
	case r.URL.Path == "/api/v1":
		reply(http.StatusOK, legacyCoreV1)
	case r.URL.Path == "/apis":
		reply(http.StatusOK, legacyGroups)
	case r.URL.Path == "/apis/apps/v1":
		reply(http.StatusOK, legacyAppsV1)
	case r.URL.Path == "/apis/metrics.k8s.io/v1beta1":
		reply(http.StatusServiceUnavailable, `{"kind":"Status","code":503}`)
	case r.URL.Path == "/api/v1/namespaces/default/pods/web":
		reply(http.StatusOK, webPodWithStatus)
	default:
		reply(http.StatusNotFound, notFoundStatus)
	}
}

func (s *fakeAPIServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func TestRESTClustersDiscovery(t *testing.T) {
	for _, aggregated := range []bool{true, false} {
		name := "legacy"
		if aggregated {
			name = "aggregated"
		}
		t.Run(name, func(t *testing.T) {
			api := &fakeAPIServer{aggregated: aggregated}
			srv := httptest.NewServer(api)
			defer srv.Close()
			kc := kube.NewRESTClusters(map[string]*rest.Config{"c1": {Host: srv.URL}})

			disc, err := kc.Discovery("c1")
			require.NoError(t, err)
			groups, lists, err := disc.ServerGroupsAndResources()
			require.Error(t, err, "metrics.k8s.io is unavailable")
			assert.Len(t, groups, 3)
			served := map[string][]string{}
			for _, l := range lists {
				for _, r := range l.APIResources {
					served[l.GroupVersion] = append(served[l.GroupVersion], r.Name)
				}
			}
			assert.NotContains(t, served, "metrics.k8s.io/v1beta1")
			assert.Contains(t, served["v1"], "pods")
			assert.Equal(t, []string{"deployments"}, served["apps/v1"])
			if aggregated {
				for _, req := range api.seen() {
					assert.Contains(t, []string{"GET /api", "GET /apis"}, req, "aggregated discovery needs no per-group request")
				}
			}

			// Through the mapper: a partial failure still maps what was served.
			dm, err := kube.NewDiscoveryMapper(kc, kube.DiscoveryConfig{}, telemetry.Settings{})
			require.NoError(t, err)
			gvr, namespaced, err := dm.ResourceFor(context.Background(), "c1", schema.GroupVersionKind{Version: "v1", Kind: "Node"})
			require.NoError(t, err)
			assert.Equal(t, "nodes", gvr.Resource)
			assert.False(t, namespaced)
			gvr, namespaced, err = dm.ResourceFor(context.Background(), "c1", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
			require.NoError(t, err)
			assert.Equal(t, "deployments", gvr.Resource)
			assert.True(t, namespaced)
		})
	}
}

func TestRESTClustersObjectCache(t *testing.T) {
	api := &fakeAPIServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	kc := kube.NewRESTClusters(map[string]*rest.Config{"c1": {Host: srv.URL}, "skipped": nil})
	assert.Equal(t, []string{"c1"}, kc.Names())

	cache, err := kube.NewObjectCache(kc, kube.ObjectCacheConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	body, err := cache.Get(context.Background(), kubetest.PodRef("c1", "default", "web"))
	require.NoError(t, err)
	var pod map[string]any
	require.NoError(t, json.Unmarshal(body, &pod))
	assert.NotContains(t, pod, "status")
	assert.NotContains(t, pod["metadata"], "managedFields")

	_, err = cache.Get(context.Background(), kubetest.PodRef("c1", "default", "gone"))
	require.ErrorIs(t, err, kube.ErrObjectNotFound)
	_, err = cache.Get(context.Background(), kubetest.PodRef("c2", "default", "web"))
	require.ErrorIs(t, err, kube.ErrUnknownCluster)

	assert.Equal(t, []string{
		"GET /api/v1/namespaces/default/pods/web?resourceVersion=0",
		"GET /api/v1/namespaces/default/pods/gone?resourceVersion=0",
	}, api.seen())
	assert.Equal(t, "kelemetry", api.agents[0])

	d1, err := kc.Dynamic("c1")
	require.NoError(t, err)
	d2, err := kc.Dynamic("c1")
	require.NoError(t, err)
	assert.Same(t, d1, d2, "one client per cluster")

	// The owner linker end to end: no body, fetched through the cache, mapped by discovery.
	links, err := linker.NewOwnerLinker(nil, cache, telemetry.Settings{}).Lookup(context.Background(), aggregator.Object{ObjectRef: kubetest.PodRef("c1", "default", "web")})
	require.NoError(t, err)
	require.Len(t, links, 1)
	assert.Equal(t, aggregator.ObjectRef{Cluster: "c1", Group: "apps", Version: "v1", Resource: "replicasets", Namespace: "default", Name: "rs", UID: "u2"}, links[0].Target)
}
