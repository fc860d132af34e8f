package diff

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/linker"
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
	return errors.Join(c.Informer.Validate(), c.LeaderElection.Validate())
}

// InformerModuleParams are the fx inputs of InformerModule.
type InformerModuleParams struct {
	fx.In

	Config        InformerModuleConfig `optional:"true"`
	Clusters      linker.Clusters      `optional:"true"`
	Logger        *slog.Logger         `optional:"true"`
	MeterProvider metric.MeterProvider `optional:"true"`
	Lifecycle     fx.Lifecycle
}

// InformerModuleResults are the fx outputs of InformerModule.
type InformerModuleResults struct {
	fx.Out

	// Cache is nil when the source is off or no cluster has clients. Pass it to
	// audit.Consumer.SetInformerDiffs only when it is not nil.
	Cache     *ChangeCache
	Informers []*Informer
	// Elector is nil unless LeaderElection is enabled.
	Elector *Elector
}

// InformerModule provides the informer diff source: one change cache shared by one Informer per
// cluster, started and stopped with the application. It needs linker.Clusters whose value also
// implements linker.DiscoveryClusters (linker.KubeClusters does) and, when Config.Clusters is
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
	disc, ok := p.Clusters.(linker.DiscoveryClusters)
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
	cache, err := NewChangeCache(cfg.Informer.Cache, p.MeterProvider)
	if err != nil {
		return InformerModuleResults{}, err
	}
	out := InformerModuleResults{Cache: cache}
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
		in, err := NewInformer(name, dyn, d, cache, cfg.Informer, p.Logger, p.MeterProvider)
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
