package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/fx"

	"github.com/kelemetry/kelemetry/aggregator"
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
	return errors.Join(c.Webhook.Validate(), c.Queue.Validate(), c.Consumer.Validate())
}

// Replayer ingests the configured audit log files once, in the background.
type Replayer struct {
	files   []string
	cluster string
	q       *Queue
	logger  *slog.Logger

	mu     sync.Mutex
	stats  []ReplayStats
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

// NewReplayer replays files into q, as cluster.
func NewReplayer(files []string, cluster string, q *Queue, logger *slog.Logger) *Replayer {
	if logger == nil {
		logger = slog.Default()
	}
	r := &Replayer{files: files, cluster: cluster, q: q, logger: logger.With("component", "audit-replay"), done: make(chan struct{})}
	if len(files) == 0 {
		close(r.done)
	}
	return r
}

// Start begins the replay in the background.
func (r *Replayer) Start(context.Context) error {
	if len(r.files) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	go func() {
		defer close(r.done)
		for _, f := range r.files {
			st, err := ReplayFile(ctx, f, r.cluster, r.q, r.logger)
			if err == nil {
				// Let everything read so far reach the sinks before reporting done.
				err = r.q.Flush(ctx)
			}
			r.mu.Lock()
			r.stats = append(r.stats, st)
			if err != nil {
				r.err = errors.Join(r.err, fmt.Errorf("replay %s: %w", f, err))
			}
			r.mu.Unlock()
			if err != nil {
				r.logger.Error("replay failed", "file", f, "error", err)
				continue
			}
			r.logger.Info("replay done", "file", f, "lines", st.Lines, "events", st.Events, "bad_lines", st.BadLines)
		}
	}()
	return nil
}

// Stop cancels a running replay and waits for it.
func (r *Replayer) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("replay: stop: %w", ctx.Err())
	}
}

// Done is closed when the replay finished (at once when there is nothing to replay).
func (r *Replayer) Done() <-chan struct{} { return r.done }

// Status returns per-file statistics so far and the replay's error, if any.
func (r *Replayer) Status() ([]ReplayStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ReplayStats(nil), r.stats...), r.err
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
var Module = fx.Module("audit", fx.Provide(newModule))

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
