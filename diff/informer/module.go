package informer

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/diff/leader"
	"github.com/kelemetry/kelemetry/internal/changes"
	etcdstoreimpl "github.com/kelemetry/kelemetry/internal/etcdstore"
	informerimpl "github.com/kelemetry/kelemetry/internal/informer"
	leaderimpl "github.com/kelemetry/kelemetry/internal/leader"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// ModuleConfig configures the informer diff source as a whole. The zero value is off.
type ModuleConfig struct {
	// Enabled turns the informer diff source on (it also needs Kubernetes clients).
	Enabled bool `yaml:"enabled"`
	// Clusters names the clusters watched; empty means every cluster the clients know.
	Clusters []string `yaml:"clusters"`
	// Informer configures each cluster's informer (resources, bounds, change cache, comparison).
	Informer Config `yaml:"informer"`
	// LeaderElection, when enabled, lets only the replica holding a Lease record (the others
	// watch and keep the last versions, ready to take over).
	LeaderElection leader.Config `yaml:"leaderElection"`
	// Cache chooses where the records live: in this process (memory, the default) or in etcd,
	// shared by replicas (the leader writes, every replica's audit consumer reads). Either way
	// Informer.Cache bounds what each process keeps in memory.
	Cache StoreConfig `yaml:"cache"`
}

// Validate reports a configuration that cannot work.
func (c ModuleConfig) Validate() error {
	for _, n := range c.Clusters {
		if n == "" {
			return errors.New("diff informer: empty cluster name")
		}
	}
	if c.LeaderElection.Enabled && c.LeaderElection.Cluster != "" && len(c.Clusters) > 0 && !slices.Contains(c.Clusters, c.LeaderElection.Cluster) {
		return fmt.Errorf("diff informer: the leader election's cluster %q is not watched", c.LeaderElection.Cluster)
	}
	return errors.Join(c.Informer.Validate(), c.LeaderElection.Validate(), c.Cache.Validate())
}

// Change store backends (StoreConfig.Backend).
const (
	backendMemory = "memory"
	BackendEtcd   = "etcd"
)

// StoreConfig chooses where the informer diff records live. The zero value keeps them in memory,
// in the process that recorded them (one replica).
type StoreConfig struct {
	// Backend is "memory" (default) or "etcd": with several replicas, the leader's records reach
	// every replica's audit consumer through etcd.
	Backend string `yaml:"backend"`
	// Etcd configures the etcd backend.
	Etcd etcdstore.Config `yaml:"etcd"`
}

// Validate reports a configuration that cannot work.
func (c StoreConfig) Validate() error {
	switch c.Backend {
	case "", backendMemory:
		return nil
	case BackendEtcd:
		return c.Etcd.Validate()
	}
	return fmt.Errorf("diff informer cache: unknown backend %q (want %q or %q)", c.Backend, backendMemory, BackendEtcd)
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config   ModuleConfig  `optional:"true"`
	Clusters kube.Clusters `optional:"true"`
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	// Changes is nil when the source is off or no cluster has clients; audit.Module joins it
	// onto the audit events (audit.Deps.InformerDiffs without fx). It is Cache with the memory
	// backend, Etcd with the etcd backend.
	Changes changes.Store
	// Cache is this process's records (with the etcd backend: its mirror of etcd); nil when
	// Changes is.
	Cache *changes.Cache
	// Etcd is nil unless Config.Cache.Backend is etcd.
	Etcd      *etcdstoreimpl.Store
	Informers []*informerimpl.Informer
	// Elector is nil unless LeaderElection is enabled.
	Elector *leaderimpl.Elector
}

// Module provides the informer diff source (newModule): one change store (Changes: a
// changes.Cache, or a etcdstore.Store shared by replicas) written by one Informer per cluster,
// started and stopped with the application. It needs kube.Clusters whose value also
// implements kube.DiscoveryClusters (kube.RESTClusters does) and, when Config.Clusters is
// empty, Names() []string.
var Module = fx.Module("diff.informer", fx.Provide(newModule))

// newModule builds what Module provides and registers the parts' Start and Stop with the
// lifecycle: the etcd cache first, then the leader election, then the informers (stopped in the
// reverse order).
func newModule(p moduleParams) (moduleResult, error) {
	cfg := p.Config
	if !cfg.Enabled || p.Clusters == nil {
		return moduleResult{}, nil
	}
	if err := cfg.Validate(); err != nil {
		return moduleResult{}, err
	}
	disc, ok := p.Clusters.(kube.DiscoveryClusters)
	if !ok {
		return moduleResult{}, errors.New("diff informer: the Kubernetes clients offer no discovery")
	}
	names := cfg.Clusters
	if len(names) == 0 {
		if n, ok := p.Clusters.(kube.NamedClusters); ok {
			names = n.Names()
		}
	}
	if len(names) == 0 {
		return moduleResult{}, nil
	}
	ts := p.Telemetry
	cacheCfg := cfg.Informer.Cache
	etcdCfg := cfg.Cache.Etcd.WithDefaults()
	if cfg.Cache.Backend == BackendEtcd && cacheCfg.TTL == 0 {
		// The mirror follows etcd's removals; its own TTL only backs them up.
		cacheCfg.TTL = etcdCfg.TTL + max(etcdCfg.TTL/10, time.Second)
	}
	cache, err := changes.NewCache(cacheCfg, ts)
	if err != nil {
		return moduleResult{}, err
	}
	out := moduleResult{Changes: cache, Cache: cache}
	if cfg.Cache.Backend == BackendEtcd {
		if out.Etcd, err = etcdstoreimpl.New(cfg.Cache.Etcd, cache, ts); err != nil {
			return moduleResult{}, err
		}
		out.Changes = out.Etcd
		if !cfg.LeaderElection.Enabled {
			ts.Log().Warn("diff informer: the etcd cache without leader election: every replica writes every record")
		}
		// Started before the informers and the consumer, stopped after them.
		p.Lifecycle.Append(fx.StartStopHook(out.Etcd.Start, out.Etcd.Stop))
	}
	if le := cfg.LeaderElection; le.Enabled {
		names = slices.Sorted(slices.Values(names))
		if le.Cluster == "" {
			le.Cluster = names[0]
		}
		dyn, err := p.Clusters.Dynamic(le.Cluster)
		if err != nil {
			return moduleResult{}, fmt.Errorf("diff informer leader election: %w", err)
		}
		if out.Elector, err = leaderimpl.New(le, dyn, ts); err != nil {
			return moduleResult{}, err
		}
		// Started before the informers, stopped after them (fx stops in reverse order).
		p.Lifecycle.Append(fx.StartStopHook(out.Elector.Start, out.Elector.Stop))
	}
	for _, name := range names {
		dyn, err := p.Clusters.Dynamic(name)
		if err != nil {
			return moduleResult{}, fmt.Errorf("diff informer: %w", err)
		}
		d, err := disc.Discovery(name)
		if err != nil {
			return moduleResult{}, fmt.Errorf("diff informer: %w", err)
		}
		in, err := informerimpl.New(name, dyn, d, out.Changes, informerimpl.Config(cfg.Informer), ts)
		if err != nil {
			return moduleResult{}, err
		}
		if out.Elector != nil {
			in.SetLeading(out.Elector.Leading)
		}
		p.Lifecycle.Append(fx.StartStopHook(in.Start, in.Stop))
		out.Informers = append(out.Informers, in)
	}
	return out, nil
}
