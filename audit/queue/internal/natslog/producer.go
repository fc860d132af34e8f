package natslog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

const scope = "github.com/kelemetry/kelemetry/natsqueue"

// Message is one queued item.
type Message struct {
	// Cluster names the Kubernetes cluster; it becomes a subject token.
	Cluster string
	// Key is the object key (e.g. group/resource/namespace/name); messages with the same key
	// land in the same partition and are consumed in publish order.
	Key string
	// ID, when set, lets JetStream drop a duplicate published again within its duplicate
	// window (2 minutes by default), e.g. when a client retries after ErrUnavailable. A second
	// copy the stream stores anyway (its check can miss one across a leader change) is
	// acknowledged without being handled when the partition's consumer handled the first among
	// its last 4,096 messages (8 x MaxInFlight when that is more). The audit ID plus stage is a
	// good ID.
	ID string
	// Payload is the message body.
	Payload []byte
}

// Producer publishes messages to the stream. It is safe for concurrent use.
type Producer struct {
	cfg    natsqueue.Config
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	pub    metric.Int64Counter
	pubErr metric.Int64Counter
	// lastSeq is the highest stream sequence JetStream acknowledged to Publish.
	lastSeq atomic.Uint64
}

// NewProducer connects to NATS and creates or updates the streams. It fails when NATS cannot be
// reached within ctx or the configuration is invalid.
func NewProducer(ctx context.Context, cfg natsqueue.Config, set telemetry.Settings) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("natsqueue config: %w", err)
	}
	cfg = cfg.WithDefaults()
	log := set.Log().With("component", "natsqueue.producer")
	m := instrument.NewMeter(set, scope)
	p := &Producer{
		cfg: cfg,
		log: log,
		pub: m.Counter("kelemetry.natsqueue.published", "Messages JetStream acknowledged", "{message}", *attribute.EmptySet()),
		pubErr: m.Counter("kelemetry.natsqueue.publish_errors", "Messages not published, by kind (full, unavailable, other)", "{message}",
			instrument.Sets("kind", "full", "unavailable", "other")...),
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	nc, err := natsqueue.Dial(cfg.Conn(), log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if err := ensureStreams(ctx, js, cfg); err != nil {
		nc.Close()
		return nil, err
	}
	p.nc, p.js = nc, js
	return p, nil
}

// Publish publishes a batch and returns after JetStream acknowledged every message, or with
// the first error: wrapped ErrFull when the stream is at its limits, wrapped ErrUnavailable
// when NATS or JetStream cannot be reached in time. After an error some messages of the batch
// may be stored; publishing the batch again with IDs set stores each message once.
func (p *Producer) Publish(ctx context.Context, msgs []Message) error {
	for _, m := range msgs {
		if err := validCluster(m.Cluster); err != nil {
			p.pubErr.Add(ctx, int64(len(msgs)), metric.WithAttributes(attribute.String("kind", "other")))
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var first error
	for _, m := range msgs {
		nm := nats.NewMsg(Subject(p.cfg, m.Cluster, Partition(m.Key, p.cfg.Partitions)))
		nm.Data = m.Payload
		opts := []jetstream.PublishOpt{jetstream.WithExpectStream(p.cfg.Stream)}
		if m.ID != "" {
			opts = append(opts, jetstream.WithMsgID(m.ID))
		}
		f, err := p.js.PublishMsgAsync(nm, opts...)
		if err != nil {
			first = fmt.Errorf("publish: %w", classify(err))
			break
		}
		futures = append(futures, f)
	}
	acked := 0
	for _, f := range futures {
		if first != nil {
			break
		}
		select {
		case ack := <-f.Ok():
			acked++
			p.noteSequence(ack.Sequence)
		case err := <-f.Err():
			first = fmt.Errorf("publish: %w", classify(err))
		case <-ctx.Done():
			first = fmt.Errorf("publish: wait for acknowledgement: %w", classify(ctx.Err()))
		}
	}
	p.pub.Add(ctx, int64(acked))
	if first != nil {
		p.pubErr.Add(ctx, int64(len(msgs)-acked), metric.WithAttributes(attribute.String("kind", errorKind(first))))
	}
	return first
}

func (p *Producer) noteSequence(seq uint64) {
	for {
		cur := p.lastSeq.Load()
		if seq <= cur || p.lastSeq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// LastSequence returns the highest stream sequence of a message this producer published and
// JetStream acknowledged (0 before the first).
func (p *Producer) LastSequence() uint64 { return p.lastSeq.Load() }

// Consumed reports whether every message of the stream up to sequence seq was acknowledged by
// the consumers (or dead-lettered): the stream keeps a message only until its acknowledgement
// (work-queue retention), so this holds once the stream is empty or its first sequence is past
// seq. It fails with a wrapped ErrUnavailable when the stream cannot be asked.
func (p *Producer) Consumed(ctx context.Context, seq uint64) (bool, error) {
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	if err != nil {
		return false, fmt.Errorf("stream %s: %w", p.cfg.Stream, classify(err))
	}
	st := s.CachedInfo().State
	return st.Msgs == 0 || st.FirstSeq > seq, nil
}

// Connected returns nil while the connection to NATS is up, else an error wrapping
// ErrUnavailable that names the connection's state.
func (p *Producer) Connected() error {
	if st := p.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: connection %s", ErrUnavailable, strings.ToLower(st.String()))
	}
	return nil
}

// Close closes the connection; publishes still waiting for their acknowledgement fail.
func (p *Producer) Close() {
	p.nc.Close()
}
