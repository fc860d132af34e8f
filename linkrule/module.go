package linkrule

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/fx"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Module provides the rule *Manager and its Linker in the "kelemetry.linkers" value group
// (newModule), started and stopped with the app. Every dependency is optional:
//   - Config: no rule directory, watch LinkRules in the cluster named Config.Cluster;
//   - kube.Clusters: without it no body is fetched, selector targets fail and nothing is
//     watched; with it, the watched cluster is Config.Cluster;
//   - kube.ObjectGetter: the cache of fetched bodies, shared with the built-in linkers
//     (kube.Module provides it); without it bodies that events do not carry are not fetched;
//   - telemetry.Settings: the default logger and no metrics when absent.
var Module = fx.Module("linkrule", fx.Provide(newModule))

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config Config            `optional:"true"`
	Getter kube.ObjectGetter `optional:"true"`
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry telemetry.Settings `optional:"true"`
	Clusters  kube.Clusters      `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Manager *Manager
	Linker  aggregator.Linker `group:"kelemetry.linkers"`
}

// newModule builds what Module provides (New) and registers the Manager's Start and Stop with
// the lifecycle.
func newModule(p moduleParams) (moduleResult, error) {
	m, err := New(p.Config, p.Clusters, p.Getter, p.Telemetry)
	if err != nil {
		return moduleResult{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(m.Start, m.Stop))
	return moduleResult{Manager: m, Linker: m.Linker()}, nil
}

// New builds a Manager and its Linker as Module does, for use without fx. clusters and getter
// (e.g. a kube.ObjectCache, for bodies the events do not carry) may be nil; ts gives the logger
// and meter provider (unset: slog.Default(), no metrics).
func New(cfg Config, clusters kube.Clusters, getter kube.ObjectGetter, ts telemetry.Settings) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var (
		lister lister
		dyn    dynamic.Interface
		err    error
	)
	if clusters != nil {
		lister = clusterLister{Clusters: clusters, Timeout: cfg.ListTimeout}
		if !cfg.DisableWatch && cfg.Cluster != "" {
			// No client for the home cluster (only other clusters are configured): no watch.
			if dyn, err = clusters.Dynamic(cfg.Cluster); errors.Is(err, kube.ErrUnknownCluster) {
				dyn = nil
			} else if err != nil {
				return nil, fmt.Errorf("linkrule: watch: %w", err)
			}
		}
	}
	l := newLinker(getter, lister, ts)
	return newManager(cfg, l, dyn, ts)
}

// Config configures the rule linker. The zero value means: no rule directory, and LinkRule
// objects watched in Cluster when a client for it exists.
type Config struct {
	// Dir is a directory of LinkRule YAML files; empty means none. Of rules with the same name,
	// the first in file order (files by name, documents in order) is the one; the others are
	// logged and skipped.
	Dir string `yaml:"dir"`
	// ReloadInterval is how often Dir is checked for changed files (default 10s; negative: never).
	ReloadInterval time.Duration `yaml:"reloadInterval"`
	// DisableWatch turns off watching LinkRule objects in the cluster.
	DisableWatch bool `yaml:"disableWatch"`
	// Cluster is the name of the cluster whose LinkRule objects are watched (the application
	// fills in its own cluster name).
	Cluster string `yaml:"cluster"`
	// StatusInterval is how often the status of watched rules is written, when it changed
	// (default 10s). Writes are coalesced: at most one per rule per interval.
	StatusInterval time.Duration `yaml:"statusInterval"`
	// MaxStatusWritesPerInterval bounds the status writes of one interval (default 20); the rest
	// wait for the next.
	MaxStatusWritesPerInterval int `yaml:"maxStatusWritesPerInterval"`
	// CostLimit bounds the CEL cost of one expression on one object (default 100,000).
	CostLimit uint64 `yaml:"costLimit"`
	// MaxTargetsPerObject bounds the links of one rule on one object (default 100).
	MaxTargetsPerObject int `yaml:"maxTargetsPerObject"`
	// ListTimeout bounds the list of a selector target (default 5s).
	ListTimeout time.Duration `yaml:"listTimeout"`
	// EvalTimeout bounds the CEL evaluation of one rule on one object (default 250ms); a rule
	// that takes longer is stopped and the evaluation counted as an error.
	EvalTimeout time.Duration `yaml:"evalTimeout"`
}

// Defaults of Config.
const (
	defaultReloadInterval = 10 * time.Second
	defaultStatusInterval = 10 * time.Second
	defaultStatusWrites   = 20
	defaultListTimeout    = 5 * time.Second
)

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.ReloadInterval == 0 {
		c.ReloadInterval = defaultReloadInterval
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = defaultStatusInterval
	}
	if c.MaxStatusWritesPerInterval == 0 {
		c.MaxStatusWritesPerInterval = defaultStatusWrites
	}
	if c.ListTimeout == 0 {
		c.ListTimeout = defaultListTimeout
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			return fmt.Errorf("linkrule: cluster: %w", err)
		}
	}
	if c.StatusInterval < 0 || c.ListTimeout < 0 || c.MaxStatusWritesPerInterval < 0 || c.MaxTargetsPerObject < 0 || c.EvalTimeout < 0 {
		return errors.New("linkrule: statusInterval, listTimeout, maxStatusWritesPerInterval, maxTargetsPerObject and evalTimeout must not be negative")
	}
	return nil
}

func (c Config) compileOptions() CompileOptions {
	return CompileOptions{CostLimit: c.CostLimit, MaxTargetsPerObject: c.MaxTargetsPerObject, EvalTimeout: c.EvalTimeout}
}
