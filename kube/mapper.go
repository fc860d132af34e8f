package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Mapper maps a kind, as written in an ownerReference, to the resource that serves it.
type Mapper interface {
	// ResourceFor returns the resource serving gvk in cluster and whether it is namespaced. The
	// returned version is gvk's version. An error means gvk cannot be mapped at all (empty kind).
	ResourceFor(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced bool, err error)
}

// errInvalidKind is returned by mappers for a GroupVersionKind without a kind.
var errInvalidKind = errors.New("kind is empty")

type resourceInfo struct {
	resource   string
	namespaced bool
}

// staticKinds are the kinds built into Kubernetes, by group.
var staticKinds = func() map[schema.GroupKind]resourceInfo {
	const ns, cl = true, false
	table := []struct {
		group, kind, resource string
		namespaced            bool
	}{
		{"", "Pod", "pods", ns},
		{"", "Node", "nodes", cl},
		{"", "Namespace", "namespaces", cl},
		{"", "Service", "services", ns},
		{"", "Endpoints", "endpoints", ns},
		{"", "ConfigMap", "configmaps", ns},
		{"", "Secret", "secrets", ns},
		{"", "ServiceAccount", "serviceaccounts", ns},
		{"", "PersistentVolume", "persistentvolumes", cl},
		{"", "PersistentVolumeClaim", "persistentvolumeclaims", ns},
		{"", "ReplicationController", "replicationcontrollers", ns},
		{"", "Event", "events", ns},
		{"", "LimitRange", "limitranges", ns},
		{"", "ResourceQuota", "resourcequotas", ns},
		{"", "PodTemplate", "podtemplates", ns},
		{"", "ComponentStatus", "componentstatuses", cl},
		{"apps", "Deployment", "deployments", ns},
		{"apps", "ReplicaSet", "replicasets", ns},
		{"apps", "StatefulSet", "statefulsets", ns},
		{"apps", "DaemonSet", "daemonsets", ns},
		{"apps", "ControllerRevision", "controllerrevisions", ns},
		{"batch", "Job", "jobs", ns},
		{"batch", "CronJob", "cronjobs", ns},
		{"autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", ns},
		{"networking.k8s.io", "Ingress", "ingresses", ns},
		{"networking.k8s.io", "IngressClass", "ingressclasses", cl},
		{"networking.k8s.io", "NetworkPolicy", "networkpolicies", ns},
		{"networking.k8s.io", "IPAddress", "ipaddresses", cl},
		{"networking.k8s.io", "ServiceCIDR", "servicecidrs", cl},
		{"rbac.authorization.k8s.io", "Role", "roles", ns},
		{"rbac.authorization.k8s.io", "RoleBinding", "rolebindings", ns},
		{"rbac.authorization.k8s.io", "ClusterRole", "clusterroles", cl},
		{"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", cl},
		{"policy", "PodDisruptionBudget", "poddisruptionbudgets", ns},
		{"storage.k8s.io", "StorageClass", "storageclasses", cl},
		{"storage.k8s.io", "VolumeAttachment", "volumeattachments", cl},
		{"storage.k8s.io", "CSIDriver", "csidrivers", cl},
		{"storage.k8s.io", "CSINode", "csinodes", cl},
		{"storage.k8s.io", "CSIStorageCapacity", "csistoragecapacities", ns},
		{"storage.k8s.io", "VolumeAttributesClass", "volumeattributesclasses", cl},
		{"apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", cl},
		{"apiregistration.k8s.io", "APIService", "apiservices", cl},
		{"discovery.k8s.io", "EndpointSlice", "endpointslices", ns},
		{"coordination.k8s.io", "Lease", "leases", ns},
		{"events.k8s.io", "Event", "events", ns},
		{"admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", cl},
		{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", cl},
		{"admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", cl},
		{"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", cl},
		{"admissionregistration.k8s.io", "MutatingAdmissionPolicy", "mutatingadmissionpolicies", cl},
		{"admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", cl},
		{"scheduling.k8s.io", "PriorityClass", "priorityclasses", cl},
		{"node.k8s.io", "RuntimeClass", "runtimeclasses", cl},
		{"certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", cl},
		{"flowcontrol.apiserver.k8s.io", "FlowSchema", "flowschemas", cl},
		{"flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", "prioritylevelconfigurations", cl},
		{"resource.k8s.io", "ResourceClaim", "resourceclaims", ns},
		{"resource.k8s.io", "ResourceClaimTemplate", "resourceclaimtemplates", ns},
		{"resource.k8s.io", "DeviceClass", "deviceclasses", cl},
		{"resource.k8s.io", "ResourceSlice", "resourceslices", cl},
	}
	m := make(map[schema.GroupKind]resourceInfo, len(table))
	for _, row := range table {
		m[schema.GroupKind{Group: row.group, Kind: row.kind}] = resourceInfo{resource: row.resource, namespaced: row.namespaced}
	}
	return m
}()

// StaticMapper maps the kinds built into Kubernetes from a fixed table and guesses the rest (see
// ResourceFor). It needs no API server. The zero value is ready to use.
type StaticMapper struct{}

// NewStaticMapper returns a StaticMapper.
func NewStaticMapper() *StaticMapper { return &StaticMapper{} }

// ResourceFor maps a built-in kind from the table. For any other kind it guesses the resource as
// the lowercase plural of the kind (see guessResource) and reports it as namespaced, because the
// scope is unknown: the owner linker then gives the owner the child's namespace, which is empty
// for a cluster-scoped child (Kubernetes does not let a cluster-scoped object have a namespaced
// owner), and right for the common case of a namespaced custom resource owning a namespaced
// object. The cluster is ignored.
func (m *StaticMapper) ResourceFor(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gvr, namespaced, _, err := m.resourceScope(ctx, cluster, gvk)
	return gvr, namespaced, err
}

// resourceScope is ResourceFor; known is false when the kind is not in the table (guessed).
func (*StaticMapper) resourceScope(_ context.Context, _ string, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, bool, error) {
	gvk, err := normalizeGVK(gvk)
	if err != nil {
		return schema.GroupVersionResource{}, false, false, err
	}
	info, ok := staticKinds[gvk.GroupKind()]
	if !ok {
		info = resourceInfo{resource: guessResource(gvk.Kind), namespaced: true}
	}
	return gvk.GroupVersion().WithResource(info.resource), info.namespaced, ok, nil
}

// scopeMapper is a Mapper that tells a known scope from a guessed one.
type scopeMapper interface {
	resourceScope(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced, known bool, err error)
}

// ResourceScope is m.ResourceFor, and also reports whether the scope is known (the built-in
// table, or the cluster's discovery) rather than guessed: StaticMapper guesses that a kind it
// does not know is namespaced, and so does DiscoveryMapper when discovery does not know the
// kind (yet), fails, or the caller's context ends first. A caller that must not invent a
// namespace, or drop one, checks known. A Mapper of another type is taken at its word (known).
func ResourceScope(ctx context.Context, m Mapper, cluster string, gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced, known bool, err error) {
	if sm, ok := m.(scopeMapper); ok {
		return sm.resourceScope(ctx, cluster, gvk)
	}
	gvr, namespaced, err = m.ResourceFor(ctx, cluster, gvk)
	return gvr, namespaced, err == nil, err
}

// Known reports whether gvk's group and kind are in the built-in table.
func (*StaticMapper) Known(gvk schema.GroupVersionKind) bool {
	_, ok := staticKinds[gvk.GroupKind()]
	return ok
}

// guessResource guesses the resource name of a kind the way most API types name it: lowercase,
// then "y" after a consonant becomes "ies", a final "s", "x", "z", "ch" or "sh" takes "es", and
// anything else takes "s" (Policy -> policies, Gateway -> gateways, Ingress -> ingresses).
func guessResource(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "":
		return ""
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "z"),
		strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	default:
		return k + "s"
	}
}

// normalizeGVK rejects an empty kind and reads an empty group and version as core v1.
func normalizeGVK(gvk schema.GroupVersionKind) (schema.GroupVersionKind, error) {
	if gvk.Kind == "" {
		return gvk, fmt.Errorf("map %s: %w", gvk, errInvalidKind)
	}
	if gvk.Group == "" && gvk.Version == "" {
		gvk.Version = "v1"
	}
	return gvk, nil
}

// ResourceDiscoverer is the part of a Kubernetes discovery client that DiscoveryMapper uses. It
// has the signature of client-go's discovery.DiscoveryInterface method, so a client-go
// discovery client can be used as is (RESTClusters hands out one). As in
// client-go, an error together with non-empty results means a partial failure: the group versions
// listed in the groups but missing from the resources could not be discovered. Implementations
// must bound the call with a timeout: DiscoveryMapper cannot cancel it.
type ResourceDiscoverer interface {
	ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

// NamedClusters lists the clusters it has clients for. RESTClusters and Config implement it.
type NamedClusters interface {
	Names() []string
}

// DiscoveryClusters gives the discovery client of a cluster. RESTClusters implements it.
type DiscoveryClusters interface {
	Discovery(cluster string) (ResourceDiscoverer, error)
}

// DiscoveryMapper maps kinds with each cluster's discovery API, so custom resources map to their
// real resource name and scope, in any served version. Results are kept in memory per cluster. A
// kind that discovery does not know triggers a new discovery, at most once per
// Config.MinRefreshInterval per cluster and shared by all callers that wait for it; until then,
// and whenever discovery fails or the caller's context ends first, the kind is mapped by a
// StaticMapper. Results older than Config.MaxAge are refreshed in the background while the old
// ones are still used. A partial discovery failure (for example an unavailable aggregated API)
// keeps the earlier results of the missing group versions and uses the rest.
type DiscoveryMapper struct {
	clusters DiscoveryClusters
	cfg      DiscoveryConfig
	static   StaticMapper
	logger   *slog.Logger
	now      func() time.Time

	refreshes                            metric.Int64Counter
	resultOK, resultPartial, resultError metric.MeasurementOption

	mu    sync.Mutex
	state map[string]*clusterResources

	running sync.WaitGroup // discovery goroutines
}

// clusterResources is what discovery found in one cluster.
type clusterResources struct {
	client ResourceDiscoverer

	mu          sync.Mutex
	byGVK       map[schema.GroupVersionKind]resourceInfo
	byGK        map[schema.GroupKind]resourceInfo // the preferred version's resource for the kind
	loaded      time.Time                         // last discovery that returned anything
	lastAttempt time.Time
	running     chan struct{} // closed when the running discovery ends; nil when none runs
}

// NewDiscoveryMapper returns a mapper that asks each cluster's discovery API through clusters.
func NewDiscoveryMapper(clusters DiscoveryClusters, cfg DiscoveryConfig, set telemetry.Settings) (*DiscoveryMapper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	meter := instrument.NewMeter(set, meterScope)
	// The metric keeps the name it had when the mapper lived in package linker.
	refreshes := meter.Counter("kelemetry.linker.discovery.refreshes",
		"Discovery runs of the resource mapper, by result (ok, partial, error).", "", instrument.Sets("result", "ok", "partial", "error")...)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("new discovery mapper: %w", err)
	}
	return &DiscoveryMapper{
		clusters:      clusters,
		cfg:           cfg.withDefaults(),
		logger:        set.Log().With("component", "kube.discovery"),
		now:           time.Now,
		refreshes:     refreshes,
		resultOK:      metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "ok"))),
		resultPartial: metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "partial"))),
		resultError:   metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "error"))),
		state:         map[string]*clusterResources{},
	}, nil
}

// ResourceFor maps gvk with cluster's discovery results, discovering again when gvk is unknown
// (rate-limited) or the results are older than Config.MaxAge, and falls back to the StaticMapper.
func (m *DiscoveryMapper) ResourceFor(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gvr, namespaced, _, err := m.resourceScope(ctx, cluster, gvk)
	return gvr, namespaced, err
}

// resourceScope is ResourceFor; known is false when the answer is the StaticMapper's guess.
func (m *DiscoveryMapper) resourceScope(ctx context.Context, cluster string, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, bool, error) {
	gvk, err := normalizeGVK(gvk)
	if err != nil {
		return schema.GroupVersionResource{}, false, false, err
	}
	st := m.clusterState(cluster)
	if st == nil {
		return m.static.resourceScope(ctx, cluster, gvk)
	}
	info, found, stale := st.lookup(gvk, m.now(), m.cfg.MaxAge)
	if !found || stale {
		// A caller with a usable (stale) answer does not wait for the discovery.
		if done := m.refreshing(cluster, st); done != nil && !found {
			select {
			case <-done:
				info, found, _ = st.lookup(gvk, m.now(), m.cfg.MaxAge)
			case <-ctx.Done():
			}
		}
	}
	if !found {
		return m.static.resourceScope(ctx, cluster, gvk)
	}
	return gvk.GroupVersion().WithResource(info.resource), info.namespaced, true, nil
}

// clusterState returns the state of cluster, or nil when it has no discovery client.
func (m *DiscoveryMapper) clusterState(cluster string) *clusterResources {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.state[cluster]; ok {
		return st
	}
	if m.clusters == nil {
		return nil
	}
	client, err := m.clusters.Discovery(cluster)
	if err != nil || client == nil {
		return nil
	}
	st := &clusterResources{client: client}
	m.state[cluster] = st
	return st
}

// lookup finds gvk, first by exact version, then by group and kind in any served version.
func (st *clusterResources) lookup(gvk schema.GroupVersionKind, now time.Time, maxAge time.Duration) (info resourceInfo, found, stale bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if info, found = st.byGVK[gvk]; !found {
		info, found = st.byGK[gvk.GroupKind()]
	}
	return info, found, now.Sub(st.loaded) > maxAge
}

// refreshing returns the channel closed when the cluster's running discovery ends, starting one
// unless the last one started less than MinRefreshInterval ago (then it returns nil). The
// discovery runs in its own goroutine so that callers can stop waiting when their context ends;
// it ends when the ResourceDiscoverer returns, which its own timeout bounds.
func (m *DiscoveryMapper) refreshing(cluster string, st *clusterResources) <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.running != nil {
		return st.running
	}
	now := m.now()
	if !st.lastAttempt.IsZero() && now.Sub(st.lastAttempt) < m.cfg.MinRefreshInterval {
		return nil
	}
	st.lastAttempt = now
	st.running = make(chan struct{})
	m.running.Add(1)
	go func() {
		defer m.running.Done()
		m.refresh(context.Background(), cluster, st)
	}()
	return st.running
}

// Stop waits until ctx ends for the running discoveries, each bounded by its client's timeout.
func (m *DiscoveryMapper) Stop(ctx context.Context) error {
	return loop.Wait(ctx, &m.running, "discovery mapper")
}

// refresh runs one discovery of cluster and merges its results.
func (m *DiscoveryMapper) refresh(ctx context.Context, cluster string, st *clusterResources) {
	groups, lists, err := st.client.ServerGroupsAndResources()

	byGVK := map[schema.GroupVersionKind]resourceInfo{}
	byGK := map[schema.GroupKind]resourceInfo{}
	preferred := map[string]string{}
	served := map[schema.GroupVersion]bool{}
	for _, g := range groups {
		if g != nil {
			preferred[g.Name] = g.PreferredVersion.Version
		}
	}
	for _, list := range lists {
		if list == nil {
			continue
		}
		gv, perr := schema.ParseGroupVersion(list.GroupVersion)
		if perr != nil {
			continue
		}
		served[gv] = true
		for _, r := range list.APIResources {
			if r.Kind == "" || strings.Contains(r.Name, "/") {
				continue // a subresource
			}
			info := resourceInfo{resource: r.Name, namespaced: r.Namespaced}
			gvk := gv.WithKind(r.Kind)
			if _, dup := byGVK[gvk]; !dup {
				byGVK[gvk] = info
			}
			gk := gvk.GroupKind()
			if _, dup := byGK[gk]; !dup || preferred[gv.Group] == gv.Version {
				byGK[gk] = info
			}
		}
	}
	// A group version listed in the groups but not served failed (that is how client-go reports
	// a partial failure).
	partial := err != nil
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, v := range g.Versions {
			if !served[schema.GroupVersion{Group: g.Name, Version: v.Version}] {
				partial = true
			}
		}
	}

	now := m.now()
	st.mu.Lock()
	defer func() {
		close(st.running)
		st.running = nil
		st.mu.Unlock()
	}()
	switch {
	case err != nil && len(served) == 0:
		m.refreshes.Add(ctx, 1, m.resultError)
		m.logger.LogAttrs(ctx, slog.LevelWarn, "discovery failed; keeping earlier results",
			slog.String("cluster", cluster), slog.Any("error", err))
		return
	case partial:
		// Keep what an earlier discovery found for every group version not served this time.
		m.refreshes.Add(ctx, 1, m.resultPartial)
		m.logger.LogAttrs(ctx, slog.LevelWarn, "discovery partly failed; keeping earlier results of the missing group versions",
			slog.String("cluster", cluster), slog.Int("servedGroupVersions", len(served)), slog.Any("error", err))
		for gvk, info := range st.byGVK {
			if served[gvk.GroupVersion()] {
				continue
			}
			if _, ok := byGVK[gvk]; !ok {
				byGVK[gvk] = info
			}
			if _, ok := byGK[gvk.GroupKind()]; !ok {
				byGK[gvk.GroupKind()] = info
			}
		}
	default:
		m.refreshes.Add(ctx, 1, m.resultOK)
	}
	st.byGVK, st.byGK, st.loaded = byGVK, byGK, now
}
