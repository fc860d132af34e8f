package kelemetry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/diff/informer"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/linker"
	"github.com/kelemetry/kelemetry/linkrule"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store"
)

// Config configures the whole application. The zero value works: an in-memory store, the audit
// webhook on :8080 and the API on :16686. Mains fill it from flags or a YAML file (LoadConfig).
type Config struct {
	// Cluster names the cluster of input that does not name one (webhook /audit, log files).
	Cluster string `yaml:"cluster"`
	// AuditAddr is the listen address of the audit webhook (default :8080).
	AuditAddr string `yaml:"auditAddr"`
	// HTTPAddr is the listen address of the API, /metrics and /healthz (default :16686).
	HTTPAddr string `yaml:"httpAddr"`
	// DataDir holds the embedded store; empty keeps traces in memory only.
	DataDir string `yaml:"dataDir"`
	// Kubeconfig, when set, is the kubeconfig of the cluster named Cluster: linkers fetch objects
	// the audit stream did not carry, the Event and informer sources watch it. Shorthand for an
	// entry of Clusters.
	Kubeconfig string `yaml:"kubeconfig"`
	// Clusters names further clusters (or all of them) and how to reach them. Link rules and
	// parent-link annotations resolve targets in any of them; the audit webhook path
	// /audit/{cluster} names the cluster of a batch.
	Clusters []ClusterConfig `yaml:"clusters"`

	Aggregator aggregator.Config `yaml:"aggregator"`
	Audit      audit.Config      `yaml:"audit"`
	Event      event.Config      `yaml:"event"`
	// InformerDiff diffs objects from informers, for clusters audited at Metadata level (the
	// all-in-one enables it with a kubeconfig).
	InformerDiff informer.ModuleConfig `yaml:"informerDiff"`
	Linker       linker.Config         `yaml:"linker"`
	// LinkRules configures the LinkRule linker: a directory of rule files, and the watch of
	// LinkRule objects in the cluster named Cluster (on when it has a kubeconfig).
	LinkRules linkrule.Config    `yaml:"linkRules"`
	Store     store.PebbleConfig `yaml:"store"`
	Memory    store.MemoryConfig `yaml:"memory"`
	OTLP      otlpsink.Config    `yaml:"otlp"`
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

// Defaults for Config.
const (
	DefaultAuditAddr  = ":8080"
	DefaultHTTPAddr   = ":16686"
	DefaultCluster    = "default"
	DefaultKubeQPS    = 50
	DefaultKubeBurst  = 100
	maxClusterNameLen = 63
)

// KubeClusters returns every configured cluster with defaults applied: Kubeconfig as the cluster
// named Cluster first, then Clusters.
func (c Config) KubeClusters() []ClusterConfig {
	c = c.WithDefaults()
	var out []ClusterConfig
	if c.Kubeconfig != "" {
		out = append(out, ClusterConfig{Name: c.Cluster, Kubeconfig: c.Kubeconfig})
	}
	for _, cc := range c.Clusters {
		if cc.Name == "" {
			cc.Name = c.Cluster
		}
		out = append(out, cc)
	}
	for i := range out {
		if out[i].QPS == 0 {
			out[i].QPS = DefaultKubeQPS
		}
		if out[i].Burst == 0 {
			out[i].Burst = DefaultKubeBurst
		}
	}
	return out
}

// HasCluster reports whether a cluster of that name is configured.
func (c Config) HasCluster(name string) bool {
	for _, cc := range c.KubeClusters() {
		if cc.Name == name {
			return true
		}
	}
	return false
}

func (c Config) validateClusters() error {
	var errs []error
	seen := map[string]bool{}
	for i, cc := range c.KubeClusters() {
		switch {
		case cc.Kubeconfig == "":
			errs = append(errs, fmt.Errorf("clusters[%d] (%s): kubeconfig is required", i, cc.Name))
		case len(cc.Name) > maxClusterNameLen || strings.ContainsAny(cc.Name, "/ \t"):
			errs = append(errs, fmt.Errorf("clusters[%d]: name %q must be at most %d characters without '/' or spaces", i, cc.Name, maxClusterNameLen))
		case seen[cc.Name]:
			errs = append(errs, fmt.Errorf("clusters[%d]: cluster %q is configured twice (kubeconfig and clusters name the same cluster)", i, cc.Name))
		case cc.QPS < 0 || cc.Burst < 0:
			errs = append(errs, fmt.Errorf("clusters[%d] (%s): qps and burst must not be negative", i, cc.Name))
		}
		seen[cc.Name] = true
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.AuditAddr == "" {
		c.AuditAddr = DefaultAuditAddr
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if c.Audit.Cluster == "" {
		c.Audit.Cluster = c.Cluster
	}
	if c.DataDir != "" && c.Store.Dir == "" {
		c.Store.Dir = c.DataDir
	}
	if c.Event.Cluster == "" {
		c.Event.Cluster = c.Cluster
	}
	if c.Event.Window == 0 {
		c.Event.Window = c.Aggregator.Window
	}
	if c.Store.Window == 0 {
		c.Store.Window = c.Aggregator.Window
	}
	if c.Memory.Window == 0 {
		c.Memory.Window = c.Aggregator.Window
	}
	if c.LinkRules.Cluster == "" {
		c.LinkRules.Cluster = c.Cluster
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	c = c.WithDefaults()
	errs := []error{c.Aggregator.Validate(), c.Audit.Validate(), c.Event.Validate(), c.Linker.Validate(), c.InformerDiff.Validate(), c.validateClusters(), c.LinkRules.Validate()}
	if c.InformerDiff.Enabled && len(c.KubeClusters()) == 0 {
		errs = append(errs, errors.New("informerDiff.enabled needs a kubeconfig"))
	}
	for _, name := range c.InformerDiff.Clusters {
		if !c.HasCluster(name) {
			errs = append(errs, fmt.Errorf("informerDiff.clusters: cluster %q has no kubeconfig", name))
		}
	}
	if c.Event.Watch && !c.HasCluster(c.Event.Cluster) {
		errs = append(errs, fmt.Errorf("event.watch needs a kubeconfig of cluster %q", c.Event.Cluster))
	}
	for _, name := range c.Event.WatchClusters {
		if !c.HasCluster(name) {
			errs = append(errs, fmt.Errorf("event.watchClusters: cluster %q has no kubeconfig", name))
		}
	}
	if c.DataDir != "" {
		errs = append(errs, c.Store.Validate())
	} else {
		errs = append(errs, c.Memory.Validate())
	}
	if c.OTLP.Endpoint != "" {
		errs = append(errs, c.OTLP.Validate())
	}
	return errors.Join(errs...)
}

// LoadConfig reads a YAML configuration file. Unknown fields are errors.
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("parse config %s: %w", path, err)
	}
	return c, nil
}
