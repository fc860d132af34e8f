package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/replay"
)

// Config configures the audit source as a whole. The zero value means defaults.
type Config struct {
	// Cluster names the cluster of input that does not name one: webhook requests to /audit
	// (unless Webhook.DefaultCluster is set) and log files.
	Cluster  string         `yaml:"cluster"`
	Webhook  WebhookConfig  `yaml:"webhook"`
	Queue    QueueConfig    `yaml:"queue"`
	Consumer ConsumerConfig `yaml:"consumer"`
	// Replay lists audit log files ingested once at start-up, in order, in the background.
	Replay []string `yaml:"replay"`
	// Follow lists audit log files followed like tail -F.
	Follow []string `yaml:"follow"`
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var cluster error
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			cluster = fmt.Errorf("audit cluster: %w", err)
		}
	}
	return errors.Join(cluster, c.Webhook.Validate(), c.Queue.Validate(), c.Consumer.Validate())
}

// Replayer ingests audit log files once, in the background, each file flushed through the queue
// before it counts as done.
type Replayer = replay.Runner[ReplayStats]

// NewReplayer replays files into q, as cluster.
func NewReplayer(files []string, cluster string, q *Queue, logger *slog.Logger) *Replayer {
	return replay.New("audit replay", files, func(ctx context.Context, file string) (ReplayStats, error) {
		st, err := ReplayFile(ctx, file, cluster, q, logger)
		if err == nil {
			// Let everything read reach the sinks before the file counts as done.
			err = q.Flush(ctx)
		}
		return st, err
	}, logger)
}

// ModuleParams are the fx inputs of the audit module.
type ModuleParams struct {
	fx.In

	Config        Config               `optional:"true"`
	Logger        *slog.Logger         `optional:"true"`
	MeterProvider metric.MeterProvider `optional:"true"`
	Aggregator    aggregator.Aggregator
	Lifecycle     fx.Lifecycle
}

// ModuleResults are the fx outputs of the audit module.
type ModuleResults struct {
	fx.Out

	Queue    *Queue
	Consumer *Consumer
	Webhook  *Webhook
	Replayer *Replayer
}

// Module provides the audit pipeline: webhook handler (register it on a mux), queue, consumer,
// replay and follow of log files. It needs an aggregator.Aggregator.
//
// The webhook is served on the audit listener of httpserver.Module (POST /audit, /audit/{cluster});
// the queue, the consumer, replay and follow run with the application even without a listener.
var Module = fx.Module("audit",
	fx.Provide(newModule,
		fx.Annotate(func(w *Webhook) httpserver.Handler { return w }, fx.ResultTags(httpserver.AuditGroup))),
	fx.Invoke(func(*Queue, *Replayer) {}),
)

func newModule(p ModuleParams) (ModuleResults, error) {
	cfg := p.Config
	if err := cfg.Validate(); err != nil {
		return ModuleResults{}, fmt.Errorf("audit config: %w", err)
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.Default()
	}
	consumer, err := NewConsumer(cfg.Consumer, p.Aggregator, logger, p.MeterProvider)
	if err != nil {
		return ModuleResults{}, err
	}
	q, err := NewQueue(cfg.Queue, consumer.Handle, logger, p.MeterProvider)
	if err != nil {
		return ModuleResults{}, err
	}
	p.Lifecycle.Append(fx.StartStopHook(q.Start, q.Stop))
	wcfg := cfg.Webhook
	if wcfg.DefaultCluster == "" {
		wcfg.DefaultCluster = cfg.Cluster
	}
	webhook := NewWebhook(wcfg, q, logger, p.MeterProvider)
	for _, f := range cfg.Follow {
		fl, err := NewFollower(FollowConfig{Path: f, Cluster: cfg.Cluster}, q, logger, p.MeterProvider)
		if err != nil {
			return ModuleResults{}, err
		}
		p.Lifecycle.Append(fx.StartStopHook(fl.Start, fl.Stop))
	}
	replayer := NewReplayer(cfg.Replay, cfg.Cluster, q, logger)
	p.Lifecycle.Append(fx.StartStopHook(replayer.Start, replayer.Stop))
	return ModuleResults{Queue: q, Consumer: consumer, Webhook: webhook, Replayer: replayer}, nil
}
