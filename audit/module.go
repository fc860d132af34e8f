package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/diff/changes"

	"github.com/kelemetry/kelemetry/audit/queue"

	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the audit source as a whole. The zero value means defaults.
type Config struct {
	// Cluster names the cluster of input that does not name one: webhook requests to /audit
	// (unless Webhook.DefaultCluster is set) and log files.
	Cluster  string          `yaml:"cluster"`
	Webhook  webhook.Config  `yaml:"webhook"`
	Queue    queue.Config    `yaml:"queue"`
	Consumer consumer.Config `yaml:"consumer"`
	// Replay lists audit log files ingested once at start-up, in order, in the background.
	Replay []string `yaml:"replay"`
	// Follow lists audit log files followed like tail -F.
	Follow []string `yaml:"follow"`
	// MaxFutureSkew is how far ahead of this receiver's clock an audit event's timestamps may be
	// (default 24h, aggregator.DefaultMaxFutureSkew; negative: no limit). Events beyond it, or
	// outside what the store can represent (years 1678 to 2261), or without a timestamp, are dropped and counted by the
	// webhook and by log replay and follow.
	MaxFutureSkew time.Duration `yaml:"maxFutureSkew"`
	// Dump writes every event the webhook accepted to a rotating file (see Dumper).
	Dump tap.DumpConfig `yaml:"dump"`
	// Forward posts every batch the webhook accepted to other audit webhooks (see Forwarder).
	Forward []tap.ForwardConfig `yaml:"forward"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var cluster error
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			cluster = fmt.Errorf("audit cluster: %w", err)
		}
	}
	var fit error
	if q, w := c.Queue.WithDefaults(), c.Webhook.WithDefaults(); q.MaxBytes > 0 && q.MaxBytes < w.MaxBodyBytes {
		fit = fmt.Errorf("audit: queue.maxBytes %d is below webhook.maxBodyBytes %d: a batch the webhook accepts could never be queued", q.MaxBytes, w.MaxBodyBytes)
	}
	return errors.Join(cluster, c.Webhook.Validate(), c.Queue.Validate(), c.Consumer.Validate(), fit, c.validateTaps())
}

// params are the fx inputs of New.
type params struct {
	fx.In

	Config Config `optional:"true"`
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry  telemetry.Settings `optional:"true"`
	Aggregator aggregator.Aggregator
	// Changes are the informer diff source's records (diff/informer.Module provides them; nil
	// when that source is off): the consumer joins them onto writes audited without a response
	// body (consumer.Deps.InformerDiffs).
	Changes   changes.Store `optional:"true"`
	Lifecycle fx.Lifecycle
	// Observers see every batch the webhook, replay and follow enqueue (see Observer).
	Observers []Observer `group:"kelemetry.audit.observers"`
}

// Result are the fx outputs of New.
type Result struct {
	fx.Out

	// Queue is what the webhook enqueues into (queue.New picks it from Config.Queue).
	Queue    queue.Queue
	Consumer *consumer.Consumer
	Webhook  *webhook.Webhook
	Replayer *auditlog.Replayer
}

// Module provides the audit pipeline (New): webhook handler, queue, consumer, replay and follow
// of log files. It needs an aggregator.Aggregator. The webhook is served on the audit listener of
// httpserver.Module (POST /audit, /audit/{cluster}); the queue, the consumer, replay and follow
// run with the application even without a listener.
var Module = fx.Module("audit",
	fx.Provide(New,
		fx.Annotate(func(w *webhook.Webhook) httpserver.Handler { return w }, fx.ResultTags(httpserver.AuditGroup))),
	fx.Invoke(func(queue.Queue, *auditlog.Replayer) {}),
)

// commitSync is what a durable or NATS queue runs before it counts a batch as handled: the
// events the consumer held for their informer diffs are sent (Consumer.Settle), then the sinks
// synced (aggregator.Engine.SyncSinks), when agg can.
func commitSync(cons *consumer.Consumer, agg aggregator.Aggregator) func(context.Context) error {
	s, _ := agg.(aggregator.SinkSyncer)
	return func(ctx context.Context) error {
		if err := cons.Settle(ctx); err != nil {
			return err
		}
		if s == nil {
			return nil
		}
		return s.SyncSinks(ctx)
	}
}

// New builds the audit pipeline and registers the parts' Start and Stop with the lifecycle.
func New(p params) (Result, error) {
	cfg := p.Config
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("audit config: %w", err)
	}
	ts := p.Telemetry
	deps := consumer.Deps{Aggregator: p.Aggregator, Telemetry: ts}
	if p.Changes != nil {
		deps.InformerDiffs = p.Changes
	}
	cons, err := consumer.New(cfg.Consumer, deps)
	if err != nil {
		return Result{}, err
	}
	eq, err := queue.New(cfg.Queue, queue.Deps{
		Handle: cons.Handle,
		// A batch is done once the store's log holds its spans, not only its memtable.
		Sync:      commitSync(cons, p.Aggregator),
		Warm:      cons.Warm,   // continuous diffs when a NATS partition moves here
		Stored:    cons.Stored, // a redelivery whose spans were written is not written again
		Telemetry: ts,
	})
	if err != nil {
		return Result{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(eq.Start, eq.Stop))
	if deps.InformerDiffs != nil {
		// The join loop that holds events for their informer diff: its hooks come after the
		// queue's, so it stops first; events handled after that are looked up once, never held.
		p.Lifecycle.Append(fx.StartStopHook(cons.Start, cons.Stop))
	}
	wcfg := cfg.Webhook
	if wcfg.DefaultCluster == "" {
		wcfg.DefaultCluster = cfg.Cluster
	}
	wcfg.MaxFutureSkew = cfg.MaxFutureSkew
	// The webhook refuses batches without reading them while the sinks or the queue cannot take
	// them.
	health := eq.Health
	if h, ok := p.Aggregator.(aggregator.SinkHealthReporter); ok {
		health = func(ctx context.Context) error { return errors.Join(h.SinkHealth(ctx), eq.Health(ctx)) }
	}
	taps, err := newTaps(cfg, p.Lifecycle, ts)
	if err != nil {
		return Result{}, err
	}
	// Observers see every event; the queue only those the consumer does not filter.
	wh := webhook.New(wcfg, webhook.Deps{Queue: observe(consumer.Prefilter(eq, cons), p.Observers...),
		Health: health, Taps: taps, Telemetry: ts})
	// Log replay and follow read their files again after a crash: they need no second copy on
	// local disk. Through NATS their events reach the replicas that own the partitions.
	replayQ := observe(consumer.Prefilter(eq.Direct(), cons), p.Observers...)
	for _, f := range cfg.Follow {
		fl, err := auditlog.NewFollower(auditlog.FollowConfig{Path: f, Cluster: cfg.Cluster, MaxFutureSkew: cfg.MaxFutureSkew}, replayQ, ts)
		if err != nil {
			return Result{}, err
		}
		p.Lifecycle.Append(fx.StartStopHook(fl.Start, fl.Stop))
	}
	replayer := auditlog.NewReplayer(cfg.Replay, cfg.Cluster, cfg.MaxFutureSkew, replayQ, ts)
	p.Lifecycle.Append(fx.StartStopHook(replayer.Start, replayer.Stop))
	return Result{Queue: eq, Consumer: cons, Webhook: wh, Replayer: replayer}, nil
}

// meterName is the instrumentation scope of the package's metrics (the queues share it).
const meterName = "github.com/kelemetry/kelemetry/audit"
