package event

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the Kubernetes Event sources. The zero value replays nothing and watches
// nothing.
type Config struct {
	// Cluster names the cluster the Events come from (the all-in-one passes its cluster).
	Cluster string `yaml:"cluster"`
	// Replay lists files of recorded Events (EventLists) sent once at start-up, in the
	// background.
	Replay []string `yaml:"replay"`
	// Watch lists and watches the cluster's Events (needs a kube.Clusters, i.e. a kubeconfig).
	Watch  bool         `yaml:"watch"`
	Source SourceConfig `yaml:"source"`
	// WatchClusters names further clusters whose Events are watched too (with Watch). Each keeps
	// its own checkpoint: the file "<checkpointFile>.<cluster>", or the ConfigMap
	// "<name>-<cluster>" in that cluster.
	WatchClusters []string `yaml:"watchClusters"`
	// MaxFutureSkew is how far ahead of this receiver's clock an Event's timestamps may be
	// (default 24h, aggregator.DefaultMaxFutureSkew; negative: no limit). Events beyond it, or
	// outside what the store can represent (years 1678 to 2261), are dropped and counted
	// (kelemetry.event.dropped_events), by the watch and by replay.
	MaxFutureSkew time.Duration `yaml:"maxFutureSkew"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			return fmt.Errorf("event: cluster: %w", err)
		}
	}
	seen := map[string]bool{c.Cluster: true}
	for _, name := range c.WatchClusters {
		if err := aggregator.ValidateClusterName(name); err != nil {
			return fmt.Errorf("event: watchClusters: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("event: watchClusters: %q is named twice (the main cluster is %q)", name, c.Cluster)
		}
		seen[name] = true
	}
	if len(c.WatchClusters) > 0 && !c.Watch {
		return errors.New("event: watchClusters needs watch")
	}
	if c.Watch {
		return c.Source.Validate()
	}
	return nil
}

// ModuleParams are the fx inputs of NewModule.
type ModuleParams struct {
	fx.In

	Config Config            `optional:"true"`
	Window aggregator.Window `optional:"true"`
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry  telemetry.Settings `optional:"true"`
	Aggregator aggregator.Aggregator
	// Clusters gives the dynamic client for Watch and a ConfigMap checkpoint.
	Clusters kube.Clusters `optional:"true"`
	// Mapper maps kinds to resources (default kube.NewStaticMapper()).
	Mapper    kube.Mapper `optional:"true"`
	Lifecycle fx.Lifecycle
}

// ModuleResult are the fx outputs of NewModule.
type ModuleResult struct {
	fx.Out

	Replayer *Replayer
	// Source watches the main cluster (Config.Cluster); nil unless Config.Watch.
	Source *Source
	// Sources are every watch: Source, then one per Config.WatchClusters.
	Sources []*Source
}

// Module provides the Event replay (*Replayer) and the Event watch (*Source, when Config.Watch)
// (NewModule), started and stopped with the app. It needs an aggregator.Aggregator.
var Module = fx.Module("event", fx.Provide(NewModule))

// NewModule builds what Module provides and registers the parts' Start and Stop with the
// lifecycle: the replay, then one watch per cluster.
func NewModule(p ModuleParams) (ModuleResult, error) {
	cfg := p.Config
	if err := cfg.Validate(); err != nil {
		return ModuleResult{}, fmt.Errorf("event config: %w", err)
	}
	ts := p.Telemetry
	conv := NewConverter(cfg.Cluster, p.Mapper, p.Window).WithMaxFutureSkew(cfg.MaxFutureSkew)
	out := ModuleResult{}
	out.Replayer = NewReplayer(cfg.Replay, conv, p.Aggregator, ts)
	p.Lifecycle.Append(fx.StartStopHook(out.Replayer.Start, out.Replayer.Stop))
	if !cfg.Watch {
		return out, nil
	}
	if p.Clusters == nil {
		return ModuleResult{}, errors.New("event: watching Events needs a Kubernetes client (a kubeconfig)")
	}
	for i, cluster := range append([]string{cfg.Cluster}, cfg.WatchClusters...) {
		conv := conv
		src := cfg.Source
		if i > 0 {
			conv = NewConverter(cluster, p.Mapper, p.Window).WithMaxFutureSkew(cfg.MaxFutureSkew)
			if src.CheckpointFile != "" {
				src.CheckpointFile += "." + cluster
			}
			if src.CheckpointConfigMap != "" {
				src.CheckpointConfigMap += "-" + cluster
			}
		}
		s, err := newWatch(p, cluster, src, conv, ts.With("cluster", cluster))
		if err != nil {
			return ModuleResult{}, err
		}
		out.Sources = append(out.Sources, s)
	}
	out.Source = out.Sources[0]
	return out, nil
}

// newWatch builds the Event watch of one cluster and ties it to the app's lifecycle.
func newWatch(p ModuleParams, cluster string, cfg SourceConfig, conv *Converter, ts telemetry.Settings) (*Source, error) {
	dyn, err := p.Clusters.Dynamic(cluster)
	if err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	var store CheckpointStore
	switch {
	case cfg.CheckpointFile != "":
		store = FileCheckpoint{Path: cfg.CheckpointFile}
	case cfg.CheckpointConfigMap != "":
		ns, name, _ := splitNamespaceName(cfg.CheckpointConfigMap) // validated
		store = ConfigMapCheckpoint{
			Client: dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns),
			Name:   name,
		}
	}
	src, err := NewSource(cfg, dyn.Resource(cfg.GVR()), conv, p.Aggregator, store, ts)
	if err != nil {
		return nil, fmt.Errorf("event: cluster %s: %w", cluster, err)
	}
	p.Lifecycle.Append(fx.StartStopHook(src.Start, src.Stop))
	return src, nil
}
