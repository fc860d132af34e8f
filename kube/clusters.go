package kube

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// RESTClusters implements Clusters and DiscoveryClusters from a rest.Config per cluster name. The
// clients of a cluster are created on first use, once, and share one HTTP client.
type RESTClusters struct {
	configs map[string]*rest.Config

	mu      sync.Mutex
	clients map[string]*kubeClients
}

type kubeClients struct {
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
}

// discoveryTimeout bounds one discovery request when the rest.Config sets no timeout.
const discoveryTimeout = 30 * time.Second

// newRESTClusters returns RESTClusters for the given configs, keyed by cluster name. It copies the
// configs and sets the user agent "kelemetry" where none is set.
func newRESTClusters(configs map[string]*rest.Config) *RESTClusters {
	k := &RESTClusters{configs: make(map[string]*rest.Config, len(configs)), clients: map[string]*kubeClients{}}
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
func (k *RESTClusters) Names() []string {
	names := make([]string, 0, len(k.configs))
	for name := range k.configs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Dynamic returns the cluster's dynamic client, or an error wrapping ErrUnknownCluster.
func (k *RESTClusters) Dynamic(cluster string) (dynamic.Interface, error) {
	c, err := k.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	return c.dynamic, nil
}

// Discovery returns the cluster's discovery client, or an error wrapping ErrUnknownCluster.
func (k *RESTClusters) Discovery(cluster string) (ResourceDiscoverer, error) {
	c, err := k.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	return c.discovery, nil
}

func (k *RESTClusters) clientsFor(cluster string) (*kubeClients, error) {
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
	discCfg := rest.CopyConfig(cfg)
	if discCfg.Timeout <= 0 {
		discCfg.Timeout = discoveryTimeout
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(discCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: discovery client: %w", cluster, err)
	}
	c := &kubeClients{dynamic: dyn, discovery: disc}
	k.clients[cluster] = c
	return c, nil
}
