package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditlog"
	"github.com/kelemetry/kelemetry/audit/consumer"
	"github.com/kelemetry/kelemetry/audit/kafka"
	"github.com/kelemetry/kelemetry/audit/otlplogs"
	"github.com/kelemetry/kelemetry/audit/tap"
	"github.com/kelemetry/kelemetry/audit/webhook"
	"github.com/kelemetry/kelemetry/health"
	"github.com/kelemetry/kelemetry/internal/changes"

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
	// OTLPLogs receives audit events as OTLP logs on the OTLP listener (an OpenTelemetry
	// Collector forwarding a managed cluster's audit stream; see package otlplogs). Off by
	// default.
	OTLPLogs otlplogs.Config `yaml:"otlpLogs"`
	// Kafka consumes audit events from Kafka topics (see package kafka); off while its brokers
	// are empty.
	Kafka kafka.Config `yaml:"kafka"`
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
	return errors.Join(cluster, c.Webhook.Validate(), c.Queue.Validate(), c.Consumer.Validate(), fit, c.validateTaps(), c.OTLPLogs.Validate(), c.Kafka.Validate())
}

// Deps are what New needs besides its Config.
type Deps struct {
	// Aggregator receives the events (required).
	Aggregator aggregator.Aggregator
	// InformerDiffs are the informer diff source's records (diff/informer.Module provides them;
	// nil when that source is off): the consumer joins them onto writes audited without a
	// response body (consumer.Deps.InformerDiffs).
	InformerDiffs changes.Store
	// Observers see every batch the webhook, replay and follow enqueue (see Observer).
	Observers []Observer
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry telemetry.Settings
}

// Pipeline is the audit pipeline that New builds: serve Webhook (its Register mounts POST /audit
// and /audit/{cluster} on a mux), Start it, and Stop it when done.
type Pipeline struct {
	// Queue is what the webhook enqueues into (queue.New picks it from Config.Queue).
	Queue    queue.Queue
	Consumer *consumer.Consumer
	Webhook  *webhook.Webhook
	Replayer *auditlog.Replayer
	// OTLPLogs receives audit events as OTLP logs (nil unless Config.OTLPLogs.Enabled): serve it
	// on the OTLP listener.
	OTLPLogs *otlplogs.Receiver

	parts []part // in the order they start
}

// part is the Start and Stop of one part of a Pipeline.
type part struct{ start, stop func(context.Context) error }

// Start starts the parts in order: the queue, the consumer's informer join, the dump and
// forwarders, log follow, then log replay. When one fails, those started are stopped again.
func (p *Pipeline) Start(ctx context.Context) error {
	for i, pt := range p.parts {
		if err := pt.start(ctx); err != nil {
			return errors.Join(err, p.stop(ctx, i))
		}
	}
	return nil
}

// Stop stops the parts in the reverse order of Start, each within ctx.
func (p *Pipeline) Stop(ctx context.Context) error { return p.stop(ctx, len(p.parts)) }

// stop stops the first n parts, last first.
func (p *Pipeline) stop(ctx context.Context, n int) error {
	var errs []error
	for i := n - 1; i >= 0; i-- {
		errs = append(errs, p.parts[i].stop(ctx))
	}
	return errors.Join(errs...)
}

// moduleParams are the fx inputs of newModule.
type moduleParams struct {
	fx.In

	Config Config `optional:"true"`
	// Telemetry gives the logger and meter provider (unset: slog.Default(), no metrics).
	Telemetry  telemetry.Settings `optional:"true"`
	Aggregator aggregator.Aggregator
	// Changes are the informer diff source's records (diff/informer.Module provides them; nil
	// when that source is off): Deps.InformerDiffs.
	Changes   changes.Store `optional:"true"`
	Lifecycle fx.Lifecycle
	// Observers see every batch the webhook, replay and follow enqueue (see Observer).
	Observers []Observer `group:"kelemetry.audit.observers"`
}

// moduleResult are the fx outputs of newModule.
type moduleResult struct {
	fx.Out

	Queue    queue.Queue
	Consumer *consumer.Consumer
	Webhook  *webhook.Webhook
	Replayer *auditlog.Replayer
	// OTLP are the OTLP listener's handlers: the OTLP logs receiver when it is on.
	OTLP []httpserver.Handler `group:"kelemetry.http.otlp,flatten"`
}

// Module provides the audit pipeline (New): webhook handler, queue, consumer, replay and follow
// of log files. It needs an aggregator.Aggregator. The webhook is served on the audit listener of
// httpserver.Module (POST /audit, /audit/{cluster}); the queue, the consumer, replay and follow
// run with the application even without a listener.
var Module = fx.Module("audit",
	fx.Provide(newModule,
		fx.Annotate(func(w *webhook.Webhook) httpserver.Handler { return w }, fx.ResultTags(httpserver.AuditGroup)),
		// The queue fails readiness while it cannot take batches: the durable log cannot be
		// written, NATS is out of reach.
		health.AsReady(func(q queue.Queue) health.Check { return health.Check{Name: "audit-queue", Func: q.Health} })),
	fx.Invoke(func(queue.Queue, *auditlog.Replayer) {}),
)

// newModule builds the pipeline (New) for Module and registers each part's Start and Stop with
// the lifecycle, in the order Pipeline.Start runs them.
func newModule(p moduleParams) (moduleResult, error) {
	pl, err := New(p.Config, Deps{Aggregator: p.Aggregator, InformerDiffs: p.Changes, Observers: p.Observers, Telemetry: p.Telemetry})
	if err != nil {
		return moduleResult{}, err
	}
	for _, pt := range pl.parts {
		p.Lifecycle.Append(fx.StartStopHook(pt.start, pt.stop))
	}
	res := moduleResult{Queue: pl.Queue, Consumer: pl.Consumer, Webhook: pl.Webhook, Replayer: pl.Replayer}
	if pl.OTLPLogs != nil {
		res.OTLP = []httpserver.Handler{pl.OTLPLogs}
	}
	return res, nil
}

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

// New builds the audit pipeline of cfg, as Module does, for use without fx; nothing runs before
// Pipeline.Start.
func New(cfg Config, deps Deps) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("audit config: %w", err)
	}
	ts := deps.Telemetry
	cons, err := consumer.New(cfg.Consumer, consumer.Deps{Aggregator: deps.Aggregator, InformerDiffs: deps.InformerDiffs, Telemetry: ts})
	if err != nil {
		return nil, err
	}
	eq, err := queue.New(cfg.Queue, queue.Deps{
		Handle: cons.Handle,
		// A batch is done once the store's log holds its spans, not only its memtable.
		Sync:      commitSync(cons, deps.Aggregator),
		Warm:      cons.Warm,   // continuous diffs when a NATS partition moves here
		Stored:    cons.Stored, // a redelivery whose spans were written is not written again
		Telemetry: ts,
	})
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{Queue: eq, Consumer: cons}
	pl.parts = append(pl.parts, part{eq.Start, eq.Stop})
	if deps.InformerDiffs != nil {
		// The join loop that holds events for their informer diff: it starts after the queue
		// and stops before it; events handled after that are looked up once, never held.
		pl.parts = append(pl.parts, part{cons.Start, cons.Stop})
	}
	wcfg := cfg.Webhook
	if wcfg.DefaultCluster == "" {
		wcfg.DefaultCluster = cfg.Cluster
	}
	wcfg.MaxFutureSkew = cfg.MaxFutureSkew
	// The webhook refuses batches without reading them while the sinks or the queue cannot take
	// them.
	health := eq.Health
	if h, ok := deps.Aggregator.(aggregator.SinkHealthReporter); ok {
		health = func(ctx context.Context) error { return errors.Join(h.SinkHealth(ctx), eq.Health(ctx)) }
	}
	taps, tapParts, err := newTaps(cfg, ts)
	if err != nil {
		return nil, err
	}
	pl.parts = append(pl.parts, tapParts...)
	// Observers see every event; the queue only those the consumer does not filter.
	pl.Webhook = webhook.New(wcfg, webhook.Deps{Queue: observe(consumer.Prefilter(eq, cons), deps.Observers...),
		Health: health, Taps: taps, Telemetry: ts})
	if cfg.OTLPLogs.Enabled {
		ocfg := cfg.OTLPLogs
		if ocfg.Cluster == "" {
			ocfg.Cluster = cfg.Cluster
		}
		// As the webhook's: acknowledged once the queue (on disk, when durable) holds them.
		pl.OTLPLogs, err = otlplogs.New(ocfg, otlplogs.Deps{Queue: observe(consumer.Prefilter(eq, cons), deps.Observers...),
			Health: health, MaxFutureSkew: cfg.MaxFutureSkew, Telemetry: ts})
		if err != nil {
			return nil, err
		}
	}
	if cfg.Kafka.Enabled() {
		kcfg := cfg.Kafka
		if kcfg.Cluster == "" {
			kcfg.Cluster = cfg.Cluster
		}
		// Offsets are committed once the queue (on disk, when durable) holds the events.
		src, err := kafka.New(kcfg, observe(consumer.Prefilter(eq, cons), deps.Observers...), cfg.MaxFutureSkew, ts)
		if err != nil {
			return nil, err
		}
		pl.parts = append(pl.parts, part{src.Start, src.Stop})
	}
	// Log replay and follow read their files again after a crash: they need no second copy on
	// local disk. Through NATS their events reach the replicas that own the partitions.
	replayQ := observe(consumer.Prefilter(eq.Direct(), cons), deps.Observers...)
	for _, f := range cfg.Follow {
		fl, err := auditlog.NewFollower(auditlog.FollowConfig{Path: f, Cluster: cfg.Cluster, MaxFutureSkew: cfg.MaxFutureSkew}, replayQ, ts)
		if err != nil {
			return nil, err
		}
		pl.parts = append(pl.parts, part{fl.Start, fl.Stop})
	}
	pl.Replayer = auditlog.NewReplayer(cfg.Replay, cfg.Cluster, cfg.MaxFutureSkew, replayQ, ts)
	pl.parts = append(pl.parts, part{pl.Replayer.Start, pl.Replayer.Stop})
	return pl, nil
}
