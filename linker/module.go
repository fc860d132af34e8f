package linker

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
)

// LinkerGroup is the fx value group the aggregator reads its linkers from.
const LinkerGroup = "kelemetry.linkers"

// Module provides the enabled built-in linkers into the "kelemetry.linkers" value group. Every
// dependency is optional:
//   - Config: zero value (both linkers, default cache and discovery settings) when absent;
//   - *slog.Logger and metric.MeterProvider: discarded logs and no-op metrics when absent;
//   - Clusters: without it there is no ObjectCache, and linkers read only the bodies that come with
//     the events;
//   - Mapper: when absent, a DiscoveryMapper if Clusters also implements DiscoveryClusters (as
//     KubeClusters does), else a StaticMapper.
//
// Both linkers share one ObjectCache, which Module also provides as ObjectGetter (nil without
// Clusters) for other linkers, and stops with the app.
var Module = fx.Module("linker", fx.Provide(provideLinkers))

// params are the fx dependencies of Module.
type params struct {
	fx.In

	Config   Config               `optional:"true"`
	Logger   *slog.Logger         `optional:"true"`
	Meter    metric.MeterProvider `optional:"true"`
	Clusters Clusters             `optional:"true"`
	Mapper   Mapper               `optional:"true"`
	LC       fx.Lifecycle
}

// result is what Module provides.
type result struct {
	fx.Out

	Linkers []aggregator.Linker `group:"kelemetry.linkers,flatten"`
	// Getter is the shared cache of object bodies fetched from the API servers, for other
	// linkers (link rules) to reuse; nil without Clusters.
	Getter ObjectGetter
}

func provideLinkers(p params) (result, error) {
	linkers, getter, stops, err := newLinkers(p.Config, p.Clusters, p.Mapper, p.Logger, p.Meter)
	if err != nil {
		return result{}, err
	}
	for _, stop := range stops {
		p.LC.Append(fx.StopHook(stop))
	}
	return result{Linkers: linkers, Getter: getter}, nil
}

// NewLinkers builds the linkers that cfg enables, as Module does, for use without fx. clusters
// and mapper may be nil (see Module). Their object GETs and discoveries end within their
// timeouts (linker.ObjectCacheConfig.FetchTimeout, the discovery client's timeout); Module also
// waits for them when the application stops.
func NewLinkers(cfg Config, clusters Clusters, mapper Mapper, logger *slog.Logger, mp metric.MeterProvider) ([]aggregator.Linker, error) {
	linkers, _, _, err := newLinkers(cfg, clusters, mapper, logger, mp)
	return linkers, err
}

func newLinkers(cfg Config, clusters Clusters, mapper Mapper, logger *slog.Logger, mp metric.MeterProvider) ([]aggregator.Linker, ObjectGetter, []func(context.Context) error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, err
	}
	logger = loggerOrDiscard(logger)
	var stops []func(context.Context) error
	var getter ObjectGetter
	if clusters != nil {
		cache, err := NewObjectCache(clusters, cfg.ObjectCache, logger, mp)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("linker: %w", err)
		}
		getter = cache
		stops = append(stops, cache.Stop)
	}
	var linkers []aggregator.Linker
	if !cfg.DisableOwner {
		if mapper == nil {
			if dc, ok := clusters.(DiscoveryClusters); ok {
				dm, err := NewDiscoveryMapper(dc, cfg.Discovery, logger, mp)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("linker: %w", err)
				}
				mapper = dm
				stops = append(stops, dm.Stop)
			} else {
				mapper = NewStaticMapper()
			}
		}
		linkers = append(linkers, NewOwnerLinker(mapper, getter, logger, mp))
	}
	if !cfg.DisableAnnotation {
		linkers = append(linkers, NewAnnotationLinker(getter, logger, mp))
	}
	return linkers, getter, stops, nil
}
