package kube

import (
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Defaults for Config, ObjectCacheConfig and DiscoveryConfig.
const (
	DefaultQPS                = 50
	DefaultBurst              = 100
	defaultObjectCacheSize    = 10_000
	defaultObjectCacheBytes   = 64 << 20
	defaultObjectCacheTTL     = time.Minute
	defaultNegativeTTL        = 10 * time.Second
	defaultFetchTimeout       = 5 * time.Second
	defaultMinRefreshInterval = time.Minute
	defaultDiscoveryMaxAge    = time.Hour
)

// Config configures Kubernetes access: the clusters, the object cache and the discovery of
// resources. The zero value means no cluster: Module then provides a nil Clusters and
// ObjectGetter and a StaticMapper.
type Config struct {
	// Clusters names each cluster and how to reach it. Names must be unique and valid (see
	// aggregator.ValidateClusterName).
	Clusters []ClusterConfig `yaml:"clusters"`
	// ObjectCache configures the cache of objects fetched from the API servers when an event
	// carries no body.
	ObjectCache ObjectCacheConfig `yaml:"objectCache"`
	// Discovery configures how kinds are mapped to resources with the clusters' discovery APIs.
	Discovery DiscoveryConfig `yaml:"discovery"`
}

// ClusterConfig names one Kubernetes cluster and how to reach it.
type ClusterConfig struct {
	// Name is the cluster's name in traces and in the webhook path /audit/{name}.
	Name string `yaml:"name"`
	// Kubeconfig is the path of the cluster's kubeconfig file.
	Kubeconfig string `yaml:"kubeconfig"`
	// Context picks a kubeconfig context other than the current one.
	Context string `yaml:"context"`
	// QPS and Burst limit the client's request rate (default 50 and 100: client-go's own
	// defaults of 5 and 10 make the informers' first lists crawl on clusters with many
	// resources).
	QPS   float32 `yaml:"qps"`
	Burst int     `yaml:"burst"`
}

// ClustersFrom lists the clusters of a configuration that names a home cluster: kubeconfig, when
// set, is the kubeconfig of the cluster named home and comes first; then clusters, where an
// entry without a name is the home cluster. Defaults are not applied (see Config.WithDefaults).
func ClustersFrom(home, kubeconfig string, clusters []ClusterConfig) []ClusterConfig {
	var out []ClusterConfig
	if kubeconfig != "" {
		out = append(out, ClusterConfig{Name: home, Kubeconfig: kubeconfig})
	}
	for _, cc := range clusters {
		if cc.Name == "" {
			cc.Name = home
		}
		out = append(out, cc)
	}
	return out
}

// WithDefaults returns c with zero fields set to their defaults, in every cluster too. It
// copies the Clusters slice.
func (c Config) WithDefaults() Config {
	c.Clusters = append([]ClusterConfig(nil), c.Clusters...)
	for i := range c.Clusters {
		if c.Clusters[i].QPS == 0 {
			c.Clusters[i].QPS = DefaultQPS
		}
		if c.Clusters[i].Burst == 0 {
			c.Clusters[i].Burst = DefaultBurst
		}
	}
	c.ObjectCache = c.ObjectCache.withDefaults()
	c.Discovery = c.Discovery.withDefaults()
	return c
}

// Has reports whether a cluster of that name is configured.
func (c Config) Has(name string) bool {
	for _, cc := range c.Clusters {
		if cc.Name == name {
			return true
		}
	}
	return false
}

// Names returns the configured cluster names, in configuration order.
func (c Config) Names() []string {
	names := make([]string, len(c.Clusters))
	for i, cc := range c.Clusters {
		names[i] = cc.Name
	}
	return names
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	errs := []error{c.ObjectCache.Validate(), c.Discovery.Validate()}
	seen := map[string]bool{}
	for i, cc := range c.Clusters {
		if err := aggregator.ValidateClusterName(cc.Name); err != nil {
			errs = append(errs, fmt.Errorf("kube: clusters[%d]: %w", i, err))
		}
		switch {
		case cc.Kubeconfig == "":
			errs = append(errs, fmt.Errorf("kube: clusters[%d] (%s): kubeconfig is required", i, cc.Name))
		case seen[cc.Name]:
			errs = append(errs, fmt.Errorf("kube: clusters[%d]: cluster %q is configured twice", i, cc.Name))
		case cc.QPS < 0 || cc.Burst < 0:
			errs = append(errs, fmt.Errorf("kube: clusters[%d] (%s): qps and burst must not be negative", i, cc.Name))
		}
		seen[cc.Name] = true
	}
	return errors.Join(errs...)
}

// ObjectCacheConfig configures ObjectCache. The zero value means defaults.
type ObjectCacheConfig struct {
	// Size bounds the number of cached objects, found or not (default 10,000).
	Size int `yaml:"size"`
	// MaxBytes bounds the bytes of the cached bodies (default 64 MiB): beyond it the least
	// recently used objects are evicted, and a body larger than the whole bound is not cached.
	MaxBytes int64 `yaml:"maxBytes"`
	// TTL is how long a fetched object is served from the cache (default 1m).
	TTL time.Duration `yaml:"ttl"`
	// NegativeTTL is how long "not found" is remembered (default 10s).
	NegativeTTL time.Duration `yaml:"negativeTTL"`
	// FetchTimeout bounds one GET from an API server (default 5s).
	FetchTimeout time.Duration `yaml:"fetchTimeout"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c ObjectCacheConfig) withDefaults() ObjectCacheConfig {
	if c.Size == 0 {
		c.Size = defaultObjectCacheSize
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultObjectCacheBytes
	}
	if c.TTL == 0 {
		c.TTL = defaultObjectCacheTTL
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = defaultNegativeTTL
	}
	if c.FetchTimeout == 0 {
		c.FetchTimeout = defaultFetchTimeout
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c ObjectCacheConfig) Validate() error {
	if c.Size < 0 || c.MaxBytes < 0 || c.TTL < 0 || c.NegativeTTL < 0 || c.FetchTimeout < 0 {
		return fmt.Errorf("kube: object cache size, maxBytes, TTLs and fetch timeout must not be negative")
	}
	return nil
}

// DiscoveryConfig configures DiscoveryMapper and the discovery clients of RESTClusters. The zero
// value means defaults.
type DiscoveryConfig struct {
	// MinRefreshInterval is the shortest time between two discoveries of one cluster (default 1m).
	// It bounds the discoveries that unknown kinds can cause.
	MinRefreshInterval time.Duration `yaml:"minRefreshInterval"`
	// MaxAge is how long discovery results are used before the next lookup refreshes them
	// (default 1h).
	MaxAge time.Duration `yaml:"maxAge"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c DiscoveryConfig) withDefaults() DiscoveryConfig {
	if c.MinRefreshInterval == 0 {
		c.MinRefreshInterval = defaultMinRefreshInterval
	}
	if c.MaxAge == 0 {
		c.MaxAge = defaultDiscoveryMaxAge
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c DiscoveryConfig) Validate() error {
	if c.MinRefreshInterval < 0 || c.MaxAge < 0 {
		return fmt.Errorf("kube: discovery intervals must not be negative")
	}
	return nil
}
