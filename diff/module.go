package diff

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/kube"
)

// InformerModuleConfig configures the informer diff source as a whole. The zero value is off.
type InformerModuleConfig struct {
	// Enabled turns the informer diff source on (it also needs Kubernetes clients).
	Enabled bool `yaml:"enabled"`
	// Clusters names the clusters watched; empty means every cluster the clients know.
	Clusters []string `yaml:"clusters"`
	// Informer configures each cluster's informer (resources, bounds, change cache, comparison).
	Informer InformerConfig `yaml:"informer"`
	// LeaderElection, when enabled, lets only the replica holding a Lease record (the others
	// watch and keep the last versions, ready to take over).
	LeaderElection LeaderElectionConfig `yaml:"leaderElection"`
	// Cache chooses where the records live: in this process (memory, the default) or in etcd,
	// shared by replicas (the leader writes, every replica's audit consumer reads). Either way
	// Informer.Cache bounds what each process keeps in memory.
	Cache CacheConfig `yaml:"cache"`
}

// Validate reports a configuration that cannot work.
func (c InformerModuleConfig) Validate() error {
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

// InformerModuleParams are the fx inputs of InformerModule.
type InformerModuleParams struct {
	fx.In

	Config        InformerModuleConfig `optional:"true"`
	Clusters      kube.Clusters        `optional:"true"`
	Logger        *slog.Logger         `optional:"true"`
	MeterProvider metric.MeterProvider `optional:"true"`
	Lifecycle     fx.Lifecycle
}

// InformerModuleResults are the fx outputs of InformerModule.
type InformerModuleResults struct {
	fx.Out

	// Changes is nil when the source is off or no cluster has clients. Pass it to
	// audit.Consumer.SetInformerDiffs only when it is not nil. It is Cache with the memory
	// backend, Etcd with the etcd backend.
	Changes Changes
	// Cache is this process's records (with the etcd backend: its mirror of etcd); nil when
	// Changes is.
	Cache *ChangeCache
	// Etcd is nil unless Config.Cache.Backend is etcd.
	Etcd      *EtcdCache
	Informers []*Informer
	// Elector is nil unless LeaderElection is enabled.
	Elector *Elector
}

// InformerModule provides the informer diff source: one change store (Changes: a ChangeCache, or
// an EtcdCache shared by replicas) written by one Informer per cluster, started and stopped with
// the application. It needs kube.Clusters whose value also
// implements kube.DiscoveryClusters (kube.KubeClusters does) and, when Config.Clusters is
// empty, Names() []string.
var InformerModule = fx.Module("diff.informer", fx.Provide(newInformerModule))

func newInformerModule(p InformerModuleParams) (InformerModuleResults, error) {
	cfg := p.Config
	if !cfg.Enabled || p.Clusters == nil {
		return InformerModuleResults{}, nil
	}
	if err := cfg.Validate(); err != nil {
		return InformerModuleResults{}, err
	}
	disc, ok := p.Clusters.(kube.DiscoveryClusters)
	if !ok {
		return InformerModuleResults{}, errors.New("diff informer: the Kubernetes clients offer no discovery")
	}
	names := cfg.Clusters
	if len(names) == 0 {
		if n, ok := p.Clusters.(interface{ Names() []string }); ok {
			names = n.Names()
		}
	}
	if len(names) == 0 {
		return InformerModuleResults{}, nil
	}
	cacheCfg := cfg.Informer.Cache
	etcdCfg := cfg.Cache.Etcd.WithDefaults()
	if cfg.Cache.Backend == BackendEtcd && cacheCfg.TTL == 0 {
		// The mirror follows etcd's removals; its own TTL only backs them up.
		cacheCfg.TTL = etcdCfg.TTL + max(etcdCfg.TTL/10, time.Second)
	}
	cache, err := NewChangeCache(cacheCfg, p.MeterProvider)
	if err != nil {
		return InformerModuleResults{}, err
	}
	out := InformerModuleResults{Changes: cache, Cache: cache}
	if cfg.Cache.Backend == BackendEtcd {
		if out.Etcd, err = NewEtcdCache(cfg.Cache.Etcd, cache, p.Logger, p.MeterProvider); err != nil {
			return InformerModuleResults{}, err
		}
		out.Changes = out.Etcd
		if !cfg.LeaderElection.Enabled && p.Logger != nil {
			p.Logger.Warn("diff informer: the etcd cache without leader election: every replica writes every record")
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
			return InformerModuleResults{}, fmt.Errorf("diff informer leader election: %w", err)
		}
		if out.Elector, err = NewElector(le, dyn, p.Logger); err != nil {
			return InformerModuleResults{}, err
		}
		// Started before the informers, stopped after them (fx stops in reverse order).
		p.Lifecycle.Append(fx.StartStopHook(out.Elector.Start, out.Elector.Stop))
	}
	for _, name := range names {
		dyn, err := p.Clusters.Dynamic(name)
		if err != nil {
			return InformerModuleResults{}, fmt.Errorf("diff informer: %w", err)
		}
		d, err := disc.Discovery(name)
		if err != nil {
			return InformerModuleResults{}, fmt.Errorf("diff informer: %w", err)
		}
		in, err := NewInformer(name, dyn, d, out.Changes, cfg.Informer, p.Logger, p.MeterProvider)
		if err != nil {
			return InformerModuleResults{}, err
		}
		if out.Elector != nil {
			in.SetLeading(out.Elector.Leading)
		}
		p.Lifecycle.Append(fx.StartStopHook(in.Start, in.Stop))
		out.Informers = append(out.Informers, in)
	}
	return out, nil
}
