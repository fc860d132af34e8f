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
	Source sourceConfig `yaml:"source"`
	// WatchClusters names further clusters whose Events are watched too (with Watch). Each keeps
	// its own checkpoint: the file "<checkpointFile>.<cluster>", or the ConfigMap
	// "<name>-<cluster>" in that cluster.
	WatchClusters []string `yaml:"watchClusters"`
	// MaxFutureSkew is how far ahead of this receiver's clock an Event's timestamps may be
	// (default 24h, aggregator.DefaultMaxFutureSkew; negative: no limit). Events beyond it, or
	// outside what the store can represent (years 1678 to 2261), are dropped and counted
	// (kelemetry_event_dropped_events_total), by the watch and by replay.
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

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
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

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Replayer *Replayer
	// Source watches the main cluster (Config.Cluster); nil unless Config.Watch.
	Source *source
	// Sources are every watch: Source, then one per Config.WatchClusters.
	Sources []*source
}

// Module provides the Event replay (*Replayer) and the Event watch (*Source, when Config.Watch)
// (newModule), started and stopped with the app. It needs an aggregator.Aggregator.
var Module = fx.Module("event", fx.Provide(newModule))

// newModule builds what Module provides and registers the parts' Start and Stop with the
// lifecycle: the replay, then one watch per cluster.
func newModule(p moduleParams) (moduleResult, error) {
	cfg := p.Config
	if err := cfg.Validate(); err != nil {
		return moduleResult{}, fmt.Errorf("event config: %w", err)
	}
	ts := p.Telemetry
	conv := NewConverter(cfg.Cluster, p.Mapper, p.Window).withMaxFutureSkew(cfg.MaxFutureSkew)
	out := moduleResult{}
	out.Replayer = newReplayer(cfg.Replay, conv, p.Aggregator, ts)
	p.Lifecycle.Append(fx.StartStopHook(out.Replayer.Start, out.Replayer.Stop))
	if !cfg.Watch {
		return out, nil
	}
	if p.Clusters == nil {
		return moduleResult{}, errors.New("event: watching Events needs a Kubernetes client (a kubeconfig)")
	}
	for i, cluster := range append([]string{cfg.Cluster}, cfg.WatchClusters...) {
		conv := conv
		src := cfg.Source
		if i > 0 {
			conv = NewConverter(cluster, p.Mapper, p.Window).withMaxFutureSkew(cfg.MaxFutureSkew)
			if src.CheckpointFile != "" {
				src.CheckpointFile += "." + cluster
			}
			if src.CheckpointConfigMap != "" {
				src.CheckpointConfigMap += "-" + cluster
			}
		}
		s, err := newWatch(p, cluster, src, conv, ts.With("cluster", cluster))
		if err != nil {
			return moduleResult{}, err
		}
		out.Sources = append(out.Sources, s)
	}
	out.Source = out.Sources[0]
	return out, nil
}

// newWatch builds the Event watch of one cluster and ties it to the app's lifecycle.
func newWatch(p moduleParams, cluster string, cfg sourceConfig, conv *Converter, ts telemetry.Settings) (*source, error) {
	dyn, err := p.Clusters.Dynamic(cluster)
	if err != nil {
		return nil, fmt.Errorf("event: %w", err)
	}
	var store checkpointStore
	switch {
	case cfg.CheckpointFile != "":
		store = fileCheckpoint{Path: cfg.CheckpointFile}
	case cfg.CheckpointConfigMap != "":
		ns, name, _ := splitNamespaceName(cfg.CheckpointConfigMap) // validated
		store = configMapCheckpoint{
			Client: dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns),
			Name:   name,
		}
	}
	src, err := newSource(cfg, dyn.Resource(cfg.gvr()), conv, p.Aggregator, store, ts)
	if err != nil {
		return nil, fmt.Errorf("event: cluster %s: %w", cluster, err)
	}
	p.Lifecycle.Append(fx.StartStopHook(src.Start, src.Stop))
	return src, nil
}
