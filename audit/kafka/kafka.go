// Package kafka consumes audit events from Kafka topics (Event Hubs speaks the Kafka protocol
// too): each record's value is a record package cloudlog reads, and its events enter the audit
// queue as webhook batches do. It consumes in a consumer group and commits a record's offset only
// once the queue holds its events (the durable queue: on disk), so a restart, a rebalance or a
// full queue loses nothing: what was not committed is read again, and the span IDs make the
// repeat harmless. One partition's records are queued in their order.
package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/cloudlog"
	"github.com/kelemetry/kelemetry/audit/queue"
	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/internal/tlsfiles"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Config configures the Kafka source. It is off while Brokers is empty.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `yaml:"brokers"`
	// Topics are the topics to consume.
	Topics []string `yaml:"topics"`
	// Group is the consumer group (default "kelemetry"): replicas in one group share the
	// partitions.
	Group string `yaml:"group"`
	// Format is the records' format (default auto; see package cloudlog).
	Format cloudlog.Format `yaml:"format"`
	// Cluster names the cluster of records that name none: the header k8s.cluster.name wins,
	// then what the record names, then this (default: the audit source's cluster).
	Cluster string `yaml:"cluster"`
	// StartAt is where a group without committed offsets starts: "earliest" (the default: the
	// retained backlog) or "latest".
	StartAt string `yaml:"startAt"`
	// TLS connects over TLS: CAFile verifies the brokers (empty: the system's roots), CertFile and
	// KeyFile are a client certificate.
	TLS TLSConfig `yaml:"tls"`
	// SASL authenticates: mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Event Hubs: PLAIN with
	// user $ConnectionString and the connection string as the password, over TLS).
	SASL SASLConfig `yaml:"sasl"`
}

// TLSConfig is the Kafka connection's TLS.
type TLSConfig struct {
	Enabled  bool   `yaml:"enabled"`
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// SASLConfig is the Kafka connection's SASL authentication.
type SASLConfig struct {
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	// PasswordFile holds the password (read at start).
	PasswordFile string `yaml:"passwordFile"`
}

// Enabled reports whether the source runs.
func (c Config) Enabled() bool { return len(c.Brokers) > 0 }

// Validate reports an unusable configuration.
func (c Config) Validate() error {
	if !c.Enabled() {
		if len(c.Topics) > 0 {
			return errors.New("kafka: topics without brokers")
		}
		return nil
	}
	var errs []error
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("kafka: no topics"))
	}
	if !c.Format.Valid() {
		errs = append(errs, fmt.Errorf("kafka.format %q: one of auto, json, eks, aks, gke", c.Format))
	}
	switch c.StartAt {
	case "", "earliest", "latest":
	default:
		errs = append(errs, fmt.Errorf("kafka.startAt %q: earliest or latest", c.StartAt))
	}
	switch strings.ToUpper(c.SASL.Mechanism) {
	case "":
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if c.SASL.Username == "" || c.SASL.PasswordFile == "" {
			errs = append(errs, errors.New("kafka.sasl: username and passwordFile are required"))
		}
	default:
		errs = append(errs, fmt.Errorf("kafka.sasl.mechanism %q: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASL.Mechanism))
	}
	if c.Cluster != "" {
		if err := aggregator.ValidateClusterName(c.Cluster); err != nil {
			errs = append(errs, fmt.Errorf("kafka.cluster: %w", err))
		}
	}
	return errors.Join(errs...)
}

// The points of kelemetry.audit.kafka.records.
const (
	recordAccepted = iota
	recordSkipped
	recordRejected
)

// clusterHeader is the record header that names a record's cluster.
const clusterHeader = "k8s.cluster.name"

// Source consumes the topics into the audit queue. Start it, then Stop it.
type Source struct {
	cfg     Config
	q       queue.Target
	skew    time.Duration
	opts    []kgo.Opt
	log     *slog.Logger
	records *instrument.FixedCounter
	badLog  ratelog.Limiter

	mu     sync.Mutex
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns the source of cfg, queueing into q (cfg.Cluster must be set).
func New(cfg Config, q queue.Target, maxFutureSkew time.Duration, tel telemetry.Settings) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cluster == "" {
		return nil, errors.New("kafka: no default cluster")
	}
	if cfg.Group == "" {
		cfg.Group = "kelemetry"
	}
	if maxFutureSkew == 0 {
		maxFutureSkew = timecheck.DefaultMaxFutureSkew
	}
	start := kgo.NewOffset().AtStart()
	if cfg.StartAt == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("kelemetry"),
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics...),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(start),
	}
	if cfg.TLS.Enabled {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if cfg.SASL.Mechanism != "" {
		m, err := mechanism(cfg.SASL)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	m := instrument.NewMeter(tel, "github.com/kelemetry/kelemetry/audit/kafka")
	return &Source{cfg: cfg, q: q, skew: maxFutureSkew, opts: opts, log: tel.Log().With("component", "kafka"),
		records: m.FixedCounter("kelemetry.audit.kafka.records",
			"Kafka records consumed as audit input, by result: accepted (their events queued, then committed), skipped (no audit event), rejected (unreadable, a bad cluster name or timestamp; committed, not retried).",
			"{record}", instrument.Sets("result", "accepted", "skipped", "rejected")...),
		badLog: ratelog.Limiter{Burst: 5, Every: time.Minute},
	}, nil
}

func tlsConfig(c TLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pool, err := tlsfiles.LoadCAPool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka tls: %w", err)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func mechanism(c SASLConfig) (sasl.Mechanism, error) {
	pw, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return nil, fmt.Errorf("kafka sasl: %w", err)
	}
	pass := strings.TrimRight(string(pw), "\r\n")
	switch strings.ToUpper(c.Mechanism) {
	case "PLAIN":
		return plain.Auth{User: c.Username, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.Username, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: c.Username, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// Start connects and consumes in the background.
func (s *Source) Start(context.Context) error {
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.cl, s.cancel, s.done = cl, cancel, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.run(ctx, cl)
	}()
	s.log.Info("consuming audit events from Kafka", "brokers", s.cfg.Brokers, "topics", s.cfg.Topics, "group", s.cfg.Group)
	return nil
}

// Stop ends the consumption (what was queued is committed; what was not is read again after a
// restart) and leaves the group. It is safe without Start.
func (s *Source) Stop(ctx context.Context) error {
	s.mu.Lock()
	cl, cancel, done := s.cl, s.cancel, s.done
	s.mu.Unlock()
	if cl == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The loop may have stopped between a poll and its AllowRebalance: leaving the group must
	// not wait for it.
	cl.CloseAllowingRebalance()
	return nil
}

// retry paces the retries of a batch the queue refused.
var retry = backoff.Policy{Base: 100 * time.Millisecond, Max: 5 * time.Second}

func (s *Source) run(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, 1000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		for _, fe := range fetches.Errors() {
			if ok, suppressed := s.badLog.Allow(time.Now()); ok {
				s.log.Warn("kafka fetch", "topic", fe.Topic, "partition", fe.Partition, "error", fe.Err, "suppressedSinceLastLog", suppressed)
			}
		}
		var done []*kgo.Record
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if ctx.Err() != nil || len(p.Records) == 0 {
				return
			}
			if s.queue(ctx, p.Records) {
				done = append(done, p.Records...)
			}
		})
		if len(done) > 0 {
			// What is queued is committed even when Stop came meanwhile: fewer records read
			// twice after a restart.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := cl.CommitRecords(cctx, done...); err != nil {
				s.log.Warn("kafka commit failed: the records will be read again", "error", err)
			}
			cancel()
		}
		cl.AllowRebalance()
	}
}

// queue decodes one partition's records and queues their events in order, waiting while the
// queue is full; false when ctx ended first (nothing of the partition is committed then).
func (s *Source) queue(ctx context.Context, records []*kgo.Record) bool {
	byCluster := map[string][]*auditv1.Event{}
	var order []string
	for _, r := range records {
		rec, err := cloudlog.Decode(s.cfg.Format, r.Value)
		if errors.Is(err, cloudlog.ErrNotAuditEvent) {
			s.records.Add(recordSkipped, 1)
			continue
		}
		cluster := s.cfg.Cluster
		if rec.Cluster != "" {
			cluster = rec.Cluster
		}
		for _, h := range r.Headers {
			if h.Key == clusterHeader && len(h.Value) > 0 {
				cluster = string(h.Value)
			}
		}
		if err == nil {
			err = aggregator.ValidateClusterName(cluster)
		}
		var kept []*auditv1.Event
		if err == nil {
			var problems []timecheck.TimeProblem
			kept, problems = timecheck.FilterEventTimes(rec.Events, time.Now(), s.skew, func(int) string { return "" })
			if len(problems) > 0 {
				err = errors.New(problems[0].Message)
			}
		}
		if err != nil {
			s.records.Add(recordRejected, 1)
			if ok, suppressed := s.badLog.Allow(time.Now()); ok {
				s.log.Warn("skip a Kafka record that holds no readable audit event", "topic", r.Topic, "partition", r.Partition,
					"offset", r.Offset, "error", err, "suppressedSinceLastLog", suppressed)
			}
		}
		if len(kept) == 0 {
			continue
		}
		s.records.Add(recordAccepted, 1)
		if _, seen := byCluster[cluster]; !seen {
			order = append(order, cluster)
		}
		byCluster[cluster] = append(byCluster[cluster], kept...)
	}
	for _, c := range order {
		for attempt := 0; ; attempt++ {
			err := queue.EnqueueParts(ctx, s.q, c, byCluster[c])
			if err == nil {
				break
			}
			if errors.Is(err, queue.ErrBatchTooLarge) || !errors.Is(err, queue.ErrFull) && !errors.Is(err, queue.ErrUnavailable) {
				// Retrying cannot help (an event larger than the queue): say so and go on.
				s.log.Error("kafka records not queued", "cluster", c, "events", len(byCluster[c]), "error", err)
				break
			}
			if !retry.Sleep(ctx, attempt) {
				return false
			}
		}
	}
	return true
}
