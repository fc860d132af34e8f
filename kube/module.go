package kube

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Module provides, from a Config (optional: zero value, no cluster) and telemetry.Settings
// (optional: the default logger, no metrics):
//   - Clusters: RESTClusters over the configured clusters, or a nil interface without any; a
//     module that finds Clusters nil has no cluster access;
//   - Mapper: a DiscoveryMapper over those clusters, or a StaticMapper without any;
//   - ObjectGetter: the ObjectCache every linker shares, or a nil interface without clusters.
//
// The cache and the mapper stop with the application.
var Module = fx.Module("kube", fx.Provide(newModule))

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Lifecycle fx.Lifecycle
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	// Clusters is a nil interface without clusters.
	Clusters Clusters
	Mapper   Mapper
	// Getter is a nil interface without clusters.
	Getter ObjectGetter
}

// newModule builds the Access of p.Config (New) for Module and stops it with the application.
func newModule(p moduleParams) (moduleResult, error) {
	a, err := New(p.Config, p.Telemetry)
	if err != nil {
		return moduleResult{}, err
	}
	p.Lifecycle.Append(fx.StopHook(a.Stop))
	return moduleResult{Clusters: a.Clusters, Mapper: a.Mapper, Getter: a.Getter}, nil
}

// Access is the Kubernetes access of one Config: what Module provides, for use without fx.
type Access struct {
	// Clusters is a nil interface without clusters (else a *RESTClusters).
	Clusters Clusters
	// Mapper is a *DiscoveryMapper with clusters, else a *StaticMapper.
	Mapper Mapper
	// Getter is a nil interface without clusters (else the *ObjectCache).
	Getter ObjectGetter

	stops []func(context.Context) error
}

// New validates cfg and builds its clients, mapper and object cache, as Module does, for use
// without fx. Nothing connects to an API server before the first lookup. Call Stop when done.
func New(cfg Config, set telemetry.Settings) (*Access, error) {
	clusters, err := newClusters(cfg) // validates cfg
	if err != nil {
		return nil, err
	}
	if clusters == nil {
		return &Access{Mapper: NewStaticMapper()}, nil
	}
	return newAccess(clusters, cfg, set)
}

// NewAccessFor builds an Access over clusters instead of kubeconfigs (cfg.Clusters is ignored):
// the ObjectCache reads through clusters, and the Mapper is a DiscoveryMapper when clusters also
// implements DiscoveryClusters, else a StaticMapper. A nil clusters gives the Access of no
// cluster.
func NewAccessFor(clusters Clusters, cfg Config, set telemetry.Settings) (*Access, error) {
	cfg.Clusters = nil
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clusters == nil {
		return &Access{Mapper: NewStaticMapper()}, nil
	}
	return newAccess(clusters, cfg, set)
}

func newAccess(clusters Clusters, cfg Config, set telemetry.Settings) (*Access, error) {
	cache, err := NewObjectCache(clusters, cfg.ObjectCache, set)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	a := &Access{Clusters: clusters, Getter: cache, Mapper: NewStaticMapper(), stops: []func(context.Context) error{cache.Stop}}
	if dc, ok := clusters.(DiscoveryClusters); ok {
		dm, err := NewDiscoveryMapper(dc, cfg.Discovery, set)
		if err != nil {
			return nil, fmt.Errorf("kube: %w", err)
		}
		a.Mapper = dm
		a.stops = append(a.stops, dm.Stop)
	}
	return a, nil
}

// Stop cancels the object cache's GETs and waits, until ctx ends, for them and for the running
// discoveries. It is safe to call more than once.
func (a *Access) Stop(ctx context.Context) error {
	var errs []error
	for _, stop := range a.stops {
		errs = append(errs, stop(ctx))
	}
	return errors.Join(errs...)
}
