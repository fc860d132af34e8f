package linker

import (
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the built-in linkers. The zero value means defaults: both linkers enabled.
// The object cache and the discovery of resources are configured in package kube (kube.Config).
type Config struct {
	// DisableOwner turns the owner-reference linker off.
	DisableOwner bool `yaml:"disableOwner"`
	// DisableAnnotation turns the parent-link annotation linker off.
	DisableAnnotation bool `yaml:"disableAnnotation"`
}

// Validate reports a configuration that cannot work; every Config works.
func (c Config) Validate() error { return nil }

// LinkerGroup is the fx value group the aggregator reads its linkers from.
const LinkerGroup = "kelemetry.linkers"

// Module provides the enabled built-in linkers into the "kelemetry.linkers" value group. Every
// dependency is optional:
//   - Config: zero value (both linkers) when absent;
//   - telemetry.Settings: the default logger and no metrics when absent;
//   - kube.Mapper (kube.Module provides one): a kube.StaticMapper when absent;
//   - kube.ObjectGetter (kube.Module provides the shared kube.ObjectCache, nil without clusters):
//     when absent or nil, linkers read only the bodies that come with the events.
var Module = fx.Module("linker", fx.Provide(newModule))

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config    Config             `optional:"true"`
	Telemetry telemetry.Settings `optional:"true"`
	Mapper    kube.Mapper        `optional:"true"`
	Getter    kube.ObjectGetter  `optional:"true"`
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Linkers []aggregator.Linker `group:"kelemetry.linkers,flatten"`
}

// newModule builds the linkers of p (New) for Module.
func newModule(p moduleParams) (moduleResult, error) {
	linkers, err := New(p.Config, p.Mapper, p.Getter, p.Telemetry)
	if err != nil {
		return moduleResult{}, err
	}
	return moduleResult{Linkers: linkers}, nil
}

// New builds the linkers that cfg enables, as Module does, for use without fx. A nil mapper
// means kube.NewStaticMapper(); a nil getter means that only the bodies that come with the
// events are read (kube.New builds a mapper and a getter from a kube.Config).
func New(cfg Config, mapper kube.Mapper, getter kube.ObjectGetter, set telemetry.Settings) ([]aggregator.Linker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if mapper == nil {
		mapper = kube.NewStaticMapper()
	}
	var linkers []aggregator.Linker
	if !cfg.DisableOwner {
		linkers = append(linkers, NewOwnerLinker(mapper, getter, set))
	}
	if !cfg.DisableAnnotation {
		linkers = append(linkers, NewAnnotationLinker(getter, set))
	}
	return linkers, nil
}
