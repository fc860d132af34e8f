package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Delivery is a message handed to a Handler.
type Delivery struct {
	// Cluster and Partition come from the subject.
	Cluster string
	// Partition is the partition of the message's object key.
	Partition int
	// ID is the message ID given at publishing ("" when none was given).
	ID string
	// Payload is the message body; it must not be modified.
	Payload []byte
	// Sequence is the message's position in the stream.
	Sequence uint64
	// Attempt counts the times the message was handed to a Handler, starting at 1.
	Attempt int
}

// Handler processes one message. A nil error acknowledges it; an error makes the Consumer retry
// it after a backoff, and after Config.MaxDeliveries attempts move it to the dead-letter stream.
// Handlers of different partitions run concurrently; one partition's messages are handled one at
// a time, in stream order. A message may be handled again after a crash (at-least-once), never
// after its acknowledgement was confirmed.
type Handler func(ctx context.Context, d Delivery) error

// Dead-letter headers, set on each message moved to the dead-letter stream.
const (
	HeaderOriginalSubject = "Kelemetry-Original-Subject"
	HeaderDeliveries      = "Kelemetry-Deliveries"
	HeaderError           = "Kelemetry-Error"
)

// Consumer processes the stream's partitions. Every replica runs one; each partition is
// processed by one of them at a time (the one the server pinned), the others stand by for it.
type Consumer struct {
	cfg Config
	log *slog.Logger
	h   Handler
	nc  *nats.Conn
	js  jetstream.JetStream

	consumed     metric.Int64Counter
	redelivered  metric.Int64Counter
	deadLettered metric.Int64Counter
	heldGauge    metric.Registration
	warmM        warmMetrics
	released     metric.Int64Counter
	histLagged   metric.Int64Counter
	// histSeq is the highest stream sequence the history stream is known to hold.
	histSeq atomic.Uint64
	ms      *membership

	// warmer, when set, rebuilds state on takeover (WithWarmer).
	warmer Warmer

	// lastMsg holds, per partition, the Unix nanoseconds of the last message received.
	lastMsg []atomic.Int64
	// lastAcked holds, per partition, the stream sequence of the last confirmed ack, so that a
	// stale redelivery of an acknowledged message is not handled again.
	lastAcked []atomic.Uint64
	// lastHandled holds, per partition, the stream sequence of the last message the handler
	// accepted, acknowledged or not: when its ack is lost (a NATS node going away), its
	// redelivery is acknowledged without handling it again.
	lastHandled []atomic.Uint64

	// onAck, when set (tests), is called after an acknowledgement was confirmed.
	onAck func(d Delivery)

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

// NewConsumer connects to NATS and creates or updates the streams and one durable consumer per
// partition (filter <prefix>.*.<partition>, explicit ack, pinned-client priority group).
func NewConsumer(ctx context.Context, cfg Config, h Handler, set telemetry.Settings, opts ...ConsumerOption) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("natsqueue: nil handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("natsqueue config: %w", err)
	}
	cfg = cfg.WithDefaults()
	log := set.Log().With("component", "natsqueue.consumer")
	m := set.Meter(scope)
	c := &Consumer{
		cfg:          cfg,
		log:          log,
		h:            h,
		consumed:     m.Counter("kelemetry.natsqueue.consumed", "Messages handled and acknowledged", "{message}"),
		redelivered:  m.Counter("kelemetry.natsqueue.redelivered", "Messages handed to the handler again (retry or redelivery)", "{message}"),
		deadLettered: m.Counter("kelemetry.natsqueue.dead_lettered", "Messages moved to the dead-letter stream", "{message}"),
		lastMsg:      make([]atomic.Int64, cfg.Partitions),
		lastAcked:    make([]atomic.Uint64, cfg.Partitions),
		lastHandled:  make([]atomic.Uint64, cfg.Partitions),
		warmM:        newWarmMetrics(m),
		histLagged: m.Counter("kelemetry.natsqueue.history_lagged",
			"Messages acknowledged before the history stream held them (after waiting publishTimeout): a takeover's warm-up misses them", "{message}"),
		released: m.Counter("kelemetry.natsqueue.partitions_released",
			"Partitions this member released because the membership assigned them to another member", "{partition}"),
	}
	for _, o := range opts {
		o(c)
	}
	c.heldGauge = m.Gauge("kelemetry.natsqueue.partitions_held",
		"Partitions this member received a message of within the last pinnedTTL", "{partition}",
		func() (int64, bool) { return int64(len(c.Held())), true })
	if err := m.Err(); err != nil {
		_ = c.heldGauge.Unregister()
		return nil, err
	}
	nc, err := connect(cfg, log)
	if err != nil {
		_ = c.heldGauge.Unregister()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		_ = c.heldGauge.Unregister()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	if err := c.ensureConsumers(ctx); err != nil {
		nc.Close()
		_ = c.heldGauge.Unregister()
		return nil, err
	}
	if c.ms, err = newMembership(ctx, js, cfg, log); err != nil {
		nc.Close()
		_ = c.heldGauge.Unregister()
		return nil, err
	}
	return c, nil
}

func (c *Consumer) ensureConsumers(ctx context.Context) error {
	if err := ensureStreams(ctx, c.js, c.cfg); err != nil {
		return err
	}
	for p := range c.cfg.Partitions {
		if _, err := c.js.CreateOrUpdateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
			Durable:        c.cfg.consumerName(p),
			Description:    "Kelemetry audit partition " + strconv.Itoa(p),
			FilterSubject:  c.cfg.SubjectPrefix + ".*." + strconv.Itoa(p),
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        c.cfg.AckWait,
			MaxDeliver:     -1, // the Consumer counts and dead-letters itself
			MaxAckPending:  c.cfg.MaxInFlight,
			Replicas:       c.cfg.Replicas,
			PriorityPolicy: jetstream.PriorityPolicyPinned,
			PriorityGroups: []string{PriorityGroup},
			PinnedTTL:      c.cfg.PinnedTTL,
		}); err != nil {
			return fmt.Errorf("create consumer of partition %d: %w", p, classify(err))
		}
	}
	return nil
}

// Start starts one pulling goroutine per partition and returns at once. The server hands a
// partition's messages to this member once it pins it (at once when no other member pulls that
// partition, otherwise when the pinned member stops pulling for PinnedTTL or is unpinned).
func (c *Consumer) Start(_ context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("natsqueue: consumer stopped")
	}
	if c.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.ms.run(ctx)
	}()
	for p := range c.cfg.Partitions {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.runPartition(ctx, p)
		}()
	}
	return nil
}

// Stop stops pulling, waits for the handlers in progress (a handler whose context ends returns
// its message to the server), leaves the membership and unpins this member's partitions so that
// the others take them over at once, and closes the connection. Messages pulled but not yet handled are redelivered after AckWait. It
// is safe without Start and more than once.
func (c *Consumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	held := c.Held()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("natsqueue: stop: %w", ctx.Err())
	}
	if err == nil {
		c.ms.leave(ctx)
		if s, serr := c.js.Stream(ctx, c.cfg.Stream); serr == nil {
			for _, p := range held {
				_ = s.UnpinConsumer(ctx, c.cfg.consumerName(p), PriorityGroup)
			}
		}
	}
	c.nc.Close()
	_ = c.heldGauge.Unregister()
	// When ctx ended first, a handler ignores its context: return rather than hang with it.
	return err
}

// kill drops the connection without returning messages or unpinning, as a crash would (tests).
func (c *Consumer) kill() {
	c.mu.Lock()
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	c.nc.Close()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	_ = c.heldGauge.Unregister()
}

// Assigned returns the partitions the membership assigns to this member (see Config.Members),
// in increasing order, and the number of live members it counted.
func (c *Consumer) Assigned() (partitions []int, members int) { return c.ms.partitions() }

// Held returns the partitions this member received a message of within the last PinnedTTL, in
// increasing order.
func (c *Consumer) Held() []int {
	since := time.Now().Add(-c.cfg.PinnedTTL).UnixNano()
	var out []int
	for p := range c.lastMsg {
		if c.lastMsg[p].Load() >= since {
			out = append(out, p)
		}
	}
	return out
}

func (c *Consumer) pullOpts() []jetstream.PullMessagesOpt {
	expiry := max(c.cfg.PinnedTTL/2, time.Second)
	return []jetstream.PullMessagesOpt{
		jetstream.PullPriorityGroup(PriorityGroup),
		jetstream.PullMaxMessages(c.cfg.MaxInFlight),
		jetstream.PullExpiry(expiry),
	}
}

// runPartition pulls one partition until ctx ends, reopening the pull after errors.
func (c *Consumer) runPartition(ctx context.Context, p int) {
	log := c.log.With("partition", p)
	backoff := c.cfg.RetryBackoff
	var tk takeover
	for ctx.Err() == nil {
		pctx, pcancel, ok := c.ms.acquire(ctx, p)
		if !ok {
			return
		}
		cons, err := c.js.Consumer(pctx, c.cfg.Stream, c.cfg.consumerName(p))
		var it jetstream.MessagesContext
		if err == nil {
			it, err = cons.Messages(c.pullOpts()...)
		}
		if err != nil {
			pcancel()
			if ctx.Err() == nil {
				log.Debug("pull partition", "err", err)
			}
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
			continue
		}
		backoff = c.cfg.RetryBackoff
		c.consume(ctx, pctx, p, it, &tk, log)
		pcancel()
		if ctx.Err() == nil && !c.ms.isAssigned(p) {
			c.release(ctx, p, &tk, log)
		}
	}
}

// release gives partition p up after the membership assigned it to another member: the
// messages pulled and not handled go back to the server (redelivered first), and the partition
// is unpinned so that the server pins the member that now pulls it.
func (c *Consumer) release(ctx context.Context, p int, tk *takeover, log *slog.Logger) {
	tk.reset()
	c.lastMsg[p].Store(0)
	s, err := c.js.Stream(ctx, c.cfg.Stream)
	if err == nil {
		err = s.UnpinConsumer(ctx, c.cfg.consumerName(p), PriorityGroup)
	}
	if err != nil && ctx.Err() == nil {
		log.Debug("unpin released partition", "err", err)
	}
	c.released.Add(ctx, 1)
	log.Info("partition released to another member")
}

// consume handles the iterator's messages until ctx ends or the iterator fails.
func (c *Consumer) consume(ctx, pctx context.Context, p int, it jetstream.MessagesContext, tk *takeover, log *slog.Logger) {
	for {
		msg, err := it.Next(jetstream.NextContext(pctx))
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				// Reassigned: return the messages pulled and not handled, oldest first, so
				// that the next member gets them before newer ones.
				it.Drain()
				for {
					m, err := it.Next(jetstream.NextMaxWait(time.Second))
					if err != nil {
						break
					}
					_ = m.Nak()
				}
				return
			}
			// A missed heartbeat, a closed iterator or connection: pull afresh (with a new
			// pin ID once the server unpinned this member).
			if ctx.Err() == nil {
				log.Debug("next message", "err", err)
			}
			it.Stop()
			sleep(pctx, c.cfg.RetryBackoff)
			return
		}
		c.lastMsg[p].Store(time.Now().UnixNano())
		if tk.changed(msg) {
			if md, err := msg.Metadata(); err == nil {
				c.warm(ctx, p, md.Sequence.Stream, log)
			}
		}
		c.handle(ctx, p, msg, log)
	}
}

// handle runs the handler on msg, retrying in place so that later messages of the partition
// never overtake a failing one, and acknowledges or dead-letters it.
func (c *Consumer) handle(ctx context.Context, p int, msg jetstream.Msg, log *slog.Logger) {
	md, err := msg.Metadata()
	if err != nil {
		log.Warn("message without JetStream metadata, terminated", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	seq := md.Sequence.Stream
	if md.NumDelivered > 1 && (seq == c.lastAcked[p].Load() || seq == c.lastHandled[p].Load()) {
		// A stale redelivery of the message just acknowledged here, or of the one just
		// handled whose ack was lost. An older sequence is not one: messages another member
		// (or a previous process) pulled and never acknowledged come back after AckWait,
		// behind newer ones.
		_ = msg.Ack()
		return
	}
	d := Delivery{
		Cluster:   clusterOf(msg.Subject(), c.cfg.SubjectPrefix),
		Partition: p,
		ID:        msg.Headers().Get(nats.MsgIdHdr),
		Payload:   msg.Data(),
		Sequence:  seq,
		Attempt:   int(md.NumDelivered),
	}
	if d.Attempt > 1 {
		c.redelivered.Add(ctx, 1)
	}
	backoff := c.cfg.RetryBackoff
	var herr error
	for d.Attempt <= c.cfg.MaxDeliveries {
		herr = c.call(ctx, d)
		if herr == nil {
			c.lastHandled[p].Store(seq)
			c.waitHistory(ctx, seq)
			if err := c.ack(ctx, msg); err != nil {
				log.Debug("ack", "seq", seq, "err", err)
				return
			}
			c.lastAcked[p].Store(seq)
			c.consumed.Add(ctx, 1)
			if c.onAck != nil {
				c.onAck(d)
			}
			return
		}
		if ctx.Err() != nil {
			_ = msg.Nak()
			return
		}
		if d.Attempt == c.cfg.MaxDeliveries {
			break
		}
		if !sleep(ctx, backoff) {
			_ = msg.Nak()
			return
		}
		_ = msg.InProgress()
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
		d.Attempt++
		c.redelivered.Add(ctx, 1)
	}
	if herr == nil {
		herr = fmt.Errorf("delivered %d times", d.Attempt)
	}
	c.deadLetter(ctx, p, msg, d, herr, log)
}

// deadLetter moves msg to the dead-letter stream and acknowledges it; when that fails the
// message goes back to the server for a later attempt.
func (c *Consumer) deadLetter(ctx context.Context, p int, msg jetstream.Msg, d Delivery, cause error, log *slog.Logger) {
	dm := nats.NewMsg(c.cfg.deadSubject(d.Cluster, p))
	dm.Data = msg.Data()
	reason := cause.Error()
	if len(reason) > 512 {
		reason = reason[:512]
	}
	dm.Header.Set(HeaderOriginalSubject, msg.Subject())
	dm.Header.Set(HeaderDeliveries, strconv.Itoa(d.Attempt))
	dm.Header.Set(HeaderError, reason)
	dm.Header.Set(nats.MsgIdHdr, c.cfg.Stream+"-dead-"+strconv.FormatUint(d.Sequence, 10))
	pctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	if _, err := c.js.PublishMsg(pctx, dm); err != nil {
		log.Warn("move message to dead-letter stream, retrying later", "seq", d.Sequence, "err", err)
		_ = msg.NakWithDelay(c.cfg.MaxRetryBackoff)
		return
	}
	if err := c.ack(ctx, msg); err != nil {
		log.Debug("ack dead-lettered message", "seq", d.Sequence, "err", err)
		return
	}
	c.lastAcked[p].Store(d.Sequence)
	c.deadLettered.Add(ctx, 1)
	log.Warn("message moved to dead-letter stream", "seq", d.Sequence, "id", d.ID,
		"subject", msg.Subject(), "deliveries", d.Attempt, "err", cause)
}

// call runs the handler, turning a panic into an error so that a message the handler cannot
// cope with is retried and then dead-lettered instead of ending the process.
func (c *Consumer) call(ctx context.Context, d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("natsqueue: handler panicked: %v", r)
		}
	}()
	return c.h(ctx, d)
}

// ack acknowledges msg and waits for the server's confirmation.
func (c *Consumer) ack(ctx context.Context, msg jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	if err := msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// clusterOf extracts the cluster token of <prefix>.<cluster>.<partition>.
func clusterOf(subject, prefix string) string {
	rest := subject[min(len(prefix)+1, len(subject)):]
	for i := range len(rest) {
		if rest[i] == '.' {
			return rest[:i]
		}
	}
	return rest
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
