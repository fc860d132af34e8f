package linker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// KubeClusters implements Clusters and DiscoveryClusters from a rest.Config per cluster name. The
// clients of a cluster are created on first use, once, and share one HTTP client.
type KubeClusters struct {
	configs map[string]*rest.Config

	mu      sync.Mutex
	clients map[string]*kubeClients
}

type kubeClients struct {
	dynamic   dynamic.Interface
	discovery *restDiscovery
}

// NewKubeClusters returns KubeClusters for the given configs, keyed by cluster name. It copies the
// configs and sets the user agent "kelemetry" where none is set.
func NewKubeClusters(configs map[string]*rest.Config) *KubeClusters {
	k := &KubeClusters{configs: make(map[string]*rest.Config, len(configs)), clients: map[string]*kubeClients{}}
	for name, cfg := range configs {
		if cfg == nil {
			continue
		}
		cfg = rest.CopyConfig(cfg)
		if cfg.UserAgent == "" {
			cfg.UserAgent = "kelemetry"
		}
		k.configs[name] = cfg
	}
	return k
}

// Names returns the configured cluster names, sorted.
func (k *KubeClusters) Names() []string {
	names := make([]string, 0, len(k.configs))
	for name := range k.configs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Dynamic returns the cluster's dynamic client, or an error wrapping ErrUnknownCluster.
func (k *KubeClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	c, err := k.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	return c.dynamic, nil
}

// Discovery returns the cluster's discovery client, or an error wrapping ErrUnknownCluster.
func (k *KubeClusters) Discovery(cluster string) (ResourceDiscoverer, error) {
	c, err := k.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	return c.discovery, nil
}

func (k *KubeClusters) clientsFor(cluster string) (*kubeClients, error) {
	cfg, ok := k.configs[cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", cluster, ErrUnknownCluster)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.clients[cluster]; ok {
		return c, nil
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: http client: %w", cluster, err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: dynamic client: %w", cluster, err)
	}
	disc, err := newRESTDiscovery(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: discovery client: %w", cluster, err)
	}
	c := &kubeClients{dynamic: dyn, discovery: disc}
	k.clients[cluster] = c
	return c, nil
}

// discoveryTimeout bounds one discovery (all its requests) when the rest.Config sets no timeout.
const discoveryTimeout = 30 * time.Second

// discoveryParallelism bounds the concurrent requests of a legacy (unaggregated) discovery.
const discoveryParallelism = 8

// discoveryAccept asks for aggregated discovery (one request for /api, one for /apis) and accepts
// the legacy documents from servers without it.
const discoveryAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList;q=0.9," +
	"application/json;q=0.8"

// restDiscovery is a small discovery client over the API server's discovery documents. It prefers
// aggregated discovery and falls back to the legacy per-group-version documents.
type restDiscovery struct {
	client  *http.Client
	base    *url.URL
	timeout time.Duration
}

func newRESTDiscovery(cfg *rest.Config, client *http.Client) (*restDiscovery, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = discoveryTimeout
	}
	return &restDiscovery{client: client, base: base, timeout: timeout}, nil
}

// discoveryDoc is the union of the root discovery documents: aggregated (APIGroupDiscoveryList),
// legacy core (APIVersions) and legacy groups (APIGroupList).
type discoveryDoc struct {
	Kind     string            `json:"kind"`
	Items    []aggregatedGroup `json:"items"`
	Versions []string          `json:"versions"`
	Groups   []metav1.APIGroup `json:"groups"`
}

type aggregatedGroup struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Versions []struct {
		Version   string `json:"version"`
		Freshness string `json:"freshness"`
		Resources []struct {
			Resource     string `json:"resource"`
			Scope        string `json:"scope"`
			ResponseKind *struct {
				Kind string `json:"kind"`
			} `json:"responseKind"`
		} `json:"resources"`
	} `json:"versions"`
}

// errStale marks a group version that aggregated discovery reports as stale (its server is down).
var errStale = errors.New("discovery document is stale")

// ServerGroupsAndResources returns every served group and the resources of each group version.
// An error with non-empty results is a partial failure: the group versions whose resources
// are missing could not be discovered.
func (d *restDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()

	var (
		groups []*metav1.APIGroup
		lists  []*metav1.APIResourceList
		legacy []string // group versions whose resources need their own request
		errs   []error
	)
	for _, root := range []string{"api", "apis"} {
		var doc discoveryDoc
		if err := d.get(ctx, root, discoveryAccept, &doc); err != nil {
			errs = append(errs, fmt.Errorf("/%s: %w", root, err))
			continue
		}
		switch doc.Kind {
		case "APIGroupDiscoveryList":
			g, l, err := fromAggregated(doc.Items)
			groups, lists = append(groups, g...), append(lists, l...)
			if err != nil {
				errs = append(errs, err)
			}
		case "APIVersions":
			g := &metav1.APIGroup{}
			for _, v := range doc.Versions {
				g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
				legacy = append(legacy, "api/"+v)
			}
			if len(g.Versions) > 0 {
				g.PreferredVersion = g.Versions[0]
			}
			groups = append(groups, g)
		case "APIGroupList":
			for i := range doc.Groups {
				g := &doc.Groups[i]
				groups = append(groups, g)
				for _, v := range g.Versions {
					legacy = append(legacy, "apis/"+v.GroupVersion)
				}
			}
		default:
			errs = append(errs, fmt.Errorf("/%s: unexpected discovery document kind %q", root, doc.Kind))
		}
	}
	lists = append(lists, d.legacyLists(ctx, legacy, &errs)...)
	if len(errs) > 0 {
		return groups, lists, fmt.Errorf("discovery: %w", errors.Join(errs...))
	}
	return groups, lists, nil
}

// legacyLists fetches the APIResourceList of each path, a few at a time.
func (d *restDiscovery) legacyLists(ctx context.Context, paths []string, errs *[]error) []*metav1.APIResourceList {
	lists := make([]*metav1.APIResourceList, len(paths))
	failures := make([]error, len(paths))
	sem := make(chan struct{}, discoveryParallelism)
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var list metav1.APIResourceList
			if err := d.get(ctx, p, "application/json", &list); err != nil {
				failures[i] = fmt.Errorf("/%s: %w", p, err)
				return
			}
			lists[i] = &list
		}()
	}
	wg.Wait()
	out := lists[:0]
	for i, l := range lists {
		if failures[i] != nil {
			*errs = append(*errs, failures[i])
		} else if l != nil {
			out = append(out, l)
		}
	}
	return out
}

func fromAggregated(items []aggregatedGroup) ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	var (
		groups []*metav1.APIGroup
		lists  []*metav1.APIResourceList
		errs   []error
	)
	for _, item := range items {
		g := &metav1.APIGroup{Name: item.Metadata.Name}
		for _, v := range item.Versions {
			gv := schema.GroupVersion{Group: item.Metadata.Name, Version: v.Version}
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version})
			if strings.EqualFold(v.Freshness, "Stale") {
				errs = append(errs, fmt.Errorf("%s: %w", gv, errStale))
				continue
			}
			list := &metav1.APIResourceList{GroupVersion: gv.String()}
			for _, r := range v.Resources {
				if r.ResponseKind == nil {
					continue
				}
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name:       r.Resource,
					Namespaced: r.Scope == "Namespaced",
					Kind:       r.ResponseKind.Kind,
				})
			}
			lists = append(lists, list)
		}
		if len(g.Versions) > 0 {
			g.PreferredVersion = g.Versions[0] // aggregated discovery lists versions by preference
		}
		groups = append(groups, g)
	}
	return groups, lists, errors.Join(errs...)
}

// get GETs a discovery document and decodes it into out.
func (d *restDiscovery) get(ctx context.Context, path, accept string, out any) error {
	u := d.base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("status %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}
