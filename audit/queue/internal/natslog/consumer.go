package natslog

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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/natsqueue"
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

// handler processes one message. A nil error accepts it: it is acknowledged with the other
// messages of its batch once the Committer returned nil. An error makes the Consumer retry it
// after a backoff, and after Config.MaxDeliveries attempts move it to the dead-letter stream.
// Handlers of different partitions run concurrently; one partition's messages are handled one at
// a time, in stream order. A message may be handled again after a crash (at-least-once), never
// after its acknowledgement was confirmed.
type handler func(ctx context.Context, d Delivery) error

// committer makes the effects of the messages a partition's Handler accepted durable (e.g. syncs
// the sinks) before they are acknowledged (WithCommitter). The Consumer handles the messages a
// partition pulled and has at hand as one batch: each in order through the Handler, then one
// Committer call, then the acknowledgements. Partitions call it concurrently.
type committer func(ctx context.Context) error

// WithCommitter sets the Committer. Without one a batch is acknowledged as soon as its messages
// were handled. A Committer error makes the Consumer retry the call with a backoff (keeping the
// batch's messages in progress); after Config.MaxDeliveries failed calls the batch's messages go
// back to the server and are handled again later. They are not dead-lettered: the messages are
// not at fault.
func WithCommitter(fn committer) ConsumerOption {
	return func(c *Consumer) { c.commit = fn }
}

// storedCheck reports, for each of the redelivered messages ds, whether its effects are durable
// already although its acknowledgement never came: the previous holder died after the sinks
// wrote its spans and before it committed the message (another partition's sink sync wrote them
// early, or the crash fell between the sync and the commit marker). Such a message is
// acknowledged without being handled again (WithStoredCheck), so that sinks that store a span
// written twice twice (Jaeger) hold it once. It is asked only about redeliveries that neither
// the commit marker nor this member's last batch accounts for.
type storedCheck func(ctx context.Context, ds []Delivery) ([]bool, error)

// WithStoredCheck sets the storedCheck. A check that fails (or times out after PublishTimeout)
// is counted and logged, and the messages it asked about are handled again.
func WithStoredCheck(fn storedCheck) ConsumerOption {
	return func(c *Consumer) { c.stored = fn }
}

// Dead-letter headers, set on each message moved to the dead-letter stream.
const (
	headerOriginalSubject = "Kelemetry-Original-Subject"
	headerDeliveries      = "Kelemetry-Deliveries"
	headerError           = "Kelemetry-Error"
	// headerStreamSeq is set on a message's copy in the history stream (written when the
	// history's sourcing lags): the message's sequence in the stream.
	headerStreamSeq = "Kelemetry-Stream-Seq"
)

// Consumer processes the stream's partitions. Every replica runs one; each partition is
// processed by one of them at a time (the one the server pinned), the others stand by for it.
type Consumer struct {
	cfg natsqueue.Config
	log *slog.Logger
	h   handler
	nc  *nats.Conn
	js  jetstream.JetStream

	consumed     metric.Int64Counter
	redelivered  metric.Int64Counter
	deadLettered metric.Int64Counter
	skipped      metric.Int64Counter
	duplicates   metric.Int64Counter
	markFailures metric.Int64Counter
	heldGauge    metric.Registration
	warmM        warmMetrics
	released     metric.Int64Counter
	histLagged   metric.Int64Counter
	histCopied   metric.Int64Counter
	// histProgress is when histSeq last grew (Unix nanoseconds).
	histProgress atomic.Int64
	// histSeq is the highest stream sequence the history stream is known to hold.
	histSeq atomic.Uint64
	ms      *membership

	// warmer, when set, rebuilds state on takeover (WithWarmer).
	warmer warmer
	// commit, when set, runs once per batch before its acknowledgements (WithCommitter).
	commit committer
	// stored, when set, tells which redeliveries are durable already (WithStoredCheck).
	stored        storedCheck
	storedSkipped metric.Int64Counter
	storedFails   metric.Int64Counter
	// marks is the commit marker bucket (committed.go).
	marks jetstream.KeyValue

	// lastMsg holds, per partition, the Unix nanoseconds of the last message received.
	lastMsg []atomic.Int64

	// streamMu guards stream, the handle Backlog asks the stream's state with (backlog.go).
	streamMu sync.Mutex
	stream   jetstream.Stream

	// onAck, when set (tests), is called after an acknowledgement was confirmed.
	onAck func(d Delivery)
	// crashBeforeAcks, when set (tests), is called after a batch's commit marker was put; when
	// it returns true the batch is not acknowledged, as if the process died there.
	crashBeforeAcks func(p int) bool

	mu     sync.Mutex
	cancel context.CancelFunc
	// stopPull ends the pulls (and the membership) but not the handlers (Stop).
	stopPull context.CancelFunc
	wg       sync.WaitGroup
	stopped  bool
}

// NewConsumer connects to NATS and creates or updates the streams and one durable consumer per
// partition (filter <prefix>.*.<partition>, explicit ack, pinned-client priority group).
func NewConsumer(ctx context.Context, cfg natsqueue.Config, h handler, set telemetry.Settings, opts ...ConsumerOption) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("natsqueue: nil handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("natsqueue config: %w", err)
	}
	cfg = cfg.WithDefaults()
	log := set.Log().With("component", "natsqueue.consumer")
	m := instrument.NewMeter(set, scope)
	none := *attribute.EmptySet() // the counters without attributes, at 0 from the start
	c := &Consumer{
		cfg:          cfg,
		log:          log,
		h:            h,
		consumed:     m.Counter("kelemetry.natsqueue.consumed", "Messages handled and acknowledged", "{message}", none),
		redelivered:  m.Counter("kelemetry.natsqueue.redelivered", "Messages handed to the handler again (retry or redelivery)", "{message}", none),
		deadLettered: m.Counter("kelemetry.natsqueue.dead_lettered", "Messages moved to the dead-letter stream", "{message}", none),
		skipped: m.Counter("kelemetry.natsqueue.committed_redeliveries",
			"Redelivered messages already committed (last batch, commit marker) or accepted in the batch in progress, not handled again", "{message}", none),
		duplicates: m.Counter("kelemetry.natsqueue.duplicates",
			"Messages with the ID of another one of their partition handled just before (a retried publish the stream stored twice), acknowledged without being handled", "{message}", none),
		storedSkipped: m.Counter("kelemetry.natsqueue.stored_redeliveries",
			"Redelivered messages whose spans the sinks already held (the previous holder died after writing them, before committing), acknowledged without being handled again", "{message}", none),
		storedFails: m.Counter("kelemetry.natsqueue.stored_check_failures",
			"Checks of redelivered messages against the sinks that failed (those messages are handled again)", "{check}", none),
		markFailures: m.Counter("kelemetry.natsqueue.commit_marker_failures",
			"Batches whose commit marker could not be written (a crash before their acks makes them handled again)", "{batch}", none),
		lastMsg: make([]atomic.Int64, cfg.Partitions),
		warmM:   newWarmMetrics(m),
		histLagged: m.Counter("kelemetry.natsqueue.history_lagged",
			"Messages acknowledged although the history stream did not hold them (its sourcing lagged and the copy failed): a takeover's warm-up misses them", "{message}", none),
		histCopied: m.Counter("kelemetry.natsqueue.history_copied",
			"Messages copied into the history stream by the consumer before their acknowledgement, because its sourcing lagged past historyWait", "{message}", none),
		released: m.Counter("kelemetry.natsqueue.partitions_released",
			"Partitions this member released because the membership assigned them to another member", "{partition}", none),
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
	nc, err := natsqueue.Dial(cfg.Conn(), log)
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
	if c.marks, err = ensureMarks(ctx, js, cfg); err != nil {
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
			Durable:        consumerName(c.cfg, p),
			Description:    "Kelemetry audit partition " + strconv.Itoa(p),
			FilterSubject:  c.cfg.SubjectPrefix + ".*." + strconv.Itoa(p),
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        c.cfg.AckWait,
			MaxDeliver:     -1, // the Consumer counts and dead-letters itself
			MaxAckPending:  c.cfg.MaxInFlight,
			Replicas:       c.cfg.Replicas,
			PriorityPolicy: jetstream.PriorityPolicyPinned,
			PriorityGroups: []string{priorityGroup},
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
	pull, stopPull := context.WithCancel(ctx)
	c.cancel, c.stopPull = cancel, stopPull
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.ms.run(pull)
	}()
	for p := range c.cfg.Partitions {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.runPartition(ctx, pull, p)
		}()
	}
	return nil
}

// Stop stops pulling, lets the batches in progress finish (handled, committed, acknowledged)
// for PublishTimeout at most (and until ctx ends), then ends their handlers' context (a handler whose context ends returns its
// message to the server), leaves the membership and unpins this member's partitions so that the
// others take them over at once, and closes the connection. Messages pulled but not yet handled
// are redelivered after AckWait. It is safe without Start and more than once.
func (c *Consumer) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	cancel, stopPull := c.cancel, c.stopPull
	c.mu.Unlock()
	held := c.Held()
	if stopPull != nil {
		stopPull()
	}
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	// The batches in progress get PublishTimeout to finish, then their handlers' context ends.
	grace := time.NewTimer(c.cfg.PublishTimeout)
	select {
	case <-done:
	case <-grace.C:
	case <-ctx.Done():
	}
	grace.Stop()
	if cancel != nil {
		cancel()
	}
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
				_ = s.UnpinConsumer(ctx, consumerName(c.cfg, p), priorityGroup)
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
	cancel, stopPull := c.cancel, c.stopPull
	c.mu.Unlock()
	c.nc.Close()
	if cancel != nil {
		stopPull()
		cancel()
	}
	c.wg.Wait()
	_ = c.heldGauge.Unregister()
}

// assigned returns the partitions the membership assigns to this member (see Config.Members),
// in increasing order, and the number of live members it counted.
func (c *Consumer) assigned() (partitions []int, members int) { return c.ms.partitions() }

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
		jetstream.PullPriorityGroup(priorityGroup),
		jetstream.PullMaxMessages(c.cfg.MaxInFlight),
		jetstream.PullExpiry(expiry),
	}
}

// batchLinger is how long a partition waits for one more message before handling those it has:
// a batch is what already arrived, it is not held back to grow.
const batchLinger = time.Millisecond

// partition is the state of the goroutine pulling one partition.
type partition struct {
	p    int
	log  *slog.Logger
	tk   takeover
	pctx context.Context // of the current pull: ends when the partition is reassigned or pull ends
	pull context.Context // ends when the Consumer stops pulling
	// done holds the messages of the current batch the handler accepted, in order, waiting
	// for the commit and their acknowledgement.
	done []accepted
	// since is when the first message of done was accepted.
	since time.Time
	// recent holds the stream sequences of the messages this member committed and
	// acknowledged (confirmed or not) or dead-lettered, the last windowSize of them: a
	// redelivery of one of them is stale (its ack was lost, e.g. a
	// NATS node going away, or crossed the redelivery after a slow commit) and is acknowledged
	// without being handled again. A sequence not in it is not stale: messages another member
	// (or a previous process) pulled and never acknowledged come back after AckWait, behind
	// newer ones.
	recent lastN[uint64, struct{}]
	// inherited holds the sequences of the commit marker read at the last takeover: the last
	// batch the previous holder (or process) committed. A redelivery of one is acknowledged
	// without being handled again.
	inherited map[uint64]struct{}
	// logged is whether a committed redelivery was logged since the last takeover.
	logged bool
	// stored holds the storedCheck's answers for the current batch's doubtful redeliveries.
	stored map[uint64]bool
	// storedLogged is whether a stored redelivery (or a failed check) was logged since the
	// last takeover.
	storedLogged bool
	// seen is the highest stream sequence the warmer or the handler saw since the last
	// takeover: a committed redelivery above it is warmed, one below it was already seen.
	seen uint64
	// ids holds the message IDs of the messages the handler accepted last (windowSize), with
	// their stream sequences. A message with one of these IDs and another sequence is a second
	// copy of a retried publish: JetStream's duplicate check usually refuses it, but not always
	// across a stream leader change.
	ids lastN[string, uint64]
	// dupLogged is whether a duplicate was logged since the last takeover.
	dupLogged bool
}

// remember adds seq to ps.recent.
func (ps *partition) remember(seq uint64) { ps.recent.add(seq, struct{}{}) }

// pending returns the index in ps.done of the message with stream sequence seq when it was
// accepted in the current batch and waits for its commit, or -1.
func (ps *partition) pending(seq uint64) int {
	for i := range ps.done {
		if ps.done[i].d.Sequence == seq {
			return i
		}
	}
	return -1
}

// accept records the ID of a message the handler accepted.
func (ps *partition) accept(id string, seq uint64) {
	if id != "" {
		ps.ids.add(id, seq)
	}
}

// secondCopy reports whether a message with id was accepted lately under another sequence, and
// that sequence.
func (ps *partition) secondCopy(id string, seq uint64) (uint64, bool) {
	if id == "" {
		return 0, false
	}
	first, ok := ps.ids.get(id)
	return first, ok && first != seq
}

// knownCommitted reports whether the message with id and seq is one this member accepted and
// committed lately.
func (ps *partition) knownCommitted(id string, seq uint64) bool {
	if id == "" {
		return false
	}
	first, ok := ps.ids.get(id)
	return ok && first == seq && ps.recent.has(seq)
}

// accepted is a message the handler accepted.
type accepted struct {
	msg jetstream.Msg
	d   Delivery
}

// runPartition pulls one partition until pull ends, reopening the pull after errors; ctx is
// the handlers' context.
func (c *Consumer) runPartition(ctx, pull context.Context, p int) {
	ps := &partition{p: p, log: c.log.With("partition", p), recent: newLastN[uint64, struct{}](windowSize(c.cfg.MaxInFlight)),
		inherited: map[uint64]struct{}{}, stored: map[uint64]bool{}, pull: pull, ids: newLastN[string, uint64](windowSize(c.cfg.MaxInFlight))}
	backoff := c.cfg.RetryBackoff
	for pull.Err() == nil {
		pctx, pcancel, ok := c.ms.acquire(pull, p)
		if !ok {
			return
		}
		cons, err := c.js.Consumer(pctx, c.cfg.Stream, consumerName(c.cfg, p))
		var it jetstream.MessagesContext
		if err == nil {
			it, err = cons.Messages(c.pullOpts()...)
		}
		if err != nil {
			pcancel()
			if pull.Err() == nil {
				ps.log.Debug("pull partition", "err", err)
			}
			if !sleep(pull, backoff) {
				return
			}
			backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
			continue
		}
		backoff = c.cfg.RetryBackoff
		ps.pctx = pctx
		c.consume(ctx, ps, it)
		pcancel()
		if pull.Err() == nil && !c.ms.isAssigned(p) {
			c.release(ctx, p, &ps.tk, ps.log)
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
		err = s.UnpinConsumer(ctx, consumerName(c.cfg, p), priorityGroup)
	}
	if err != nil && ctx.Err() == nil {
		log.Debug("unpin released partition", "err", err)
	}
	c.released.Add(ctx, 1)
	log.Info("partition released to another member")
}

// consume handles the iterator's messages, in batches of those already received (at most
// MaxInFlight), until ctx ends or the iterator fails.
func (c *Consumer) consume(ctx context.Context, ps *partition, it jetstream.MessagesContext) {
	batch := make([]jetstream.Msg, 0, c.cfg.MaxInFlight)
	for {
		msg, err := it.Next(jetstream.NextContext(ps.pctx))
		if err != nil {
			c.endPull(ctx, ps, it, err)
			return
		}
		batch = append(batch[:0], msg)
		var nextErr error
		for len(batch) < cap(batch) {
			m, err := it.Next(jetstream.NextMaxWait(batchLinger))
			if err != nil {
				if !errors.Is(err, nats.ErrTimeout) {
					nextErr = err
				}
				break
			}
			batch = append(batch, m)
		}
		c.handleBatch(ctx, ps, batch)
		clear(batch)
		if nextErr != nil {
			c.endPull(ctx, ps, it, nextErr)
			return
		}
	}
}

// endPull ends a pull after Next failed with err.
func (c *Consumer) endPull(ctx context.Context, ps *partition, it jetstream.MessagesContext, err error) {
	if ctx.Err() == nil && ps.pull.Err() == nil && ps.pctx.Err() != nil {
		// Reassigned: return the messages pulled and not handled, oldest first, so that the
		// next member gets them before newer ones.
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
	// A missed heartbeat, a closed iterator or connection: pull afresh (with a new pin ID once
	// the server unpinned this member).
	if ctx.Err() == nil {
		ps.log.Debug("next message", "err", err)
	}
	it.Stop()
	sleep(ps.pctx, c.cfg.RetryBackoff)
}

// handleBatch handles msgs in order, then commits and acknowledges those the handler accepted.
// When ctx ends first the messages not acknowledged go back to the server, oldest first.
func (c *Consumer) handleBatch(ctx context.Context, ps *partition, msgs []jetstream.Msg) {
	for i, msg := range msgs {
		c.lastMsg[ps.p].Store(time.Now().UnixNano())
		if ps.tk.changed(msg) {
			c.loadMark(ctx, ps)
			ps.seen, ps.logged, ps.storedLogged, ps.dupLogged = 0, false, false, false
			if md, err := msg.Metadata(); err == nil {
				c.warm(ctx, ps.p, md.Sequence.Stream, ps.log)
				ps.seen = md.Sequence.Stream - 1
			}
		}
		if c.stored != nil {
			if seq, ok := c.doubtful(ps, msg); ok {
				if _, asked := ps.stored[seq]; !asked {
					c.checkStored(ctx, ps, msgs[i:])
				}
			}
		}
		if len(ps.done) > 0 && time.Since(ps.since) > c.cfg.AckWait/4 {
			// Slow handling: acknowledge what is done before AckWait redelivers it.
			c.flush(ctx, ps)
		}
		if !c.handle(ctx, ps, msg) {
			c.flushLast(ctx, ps)
			for _, m := range msgs[i:] {
				_ = m.Nak()
			}
			clear(ps.stored)
			return
		}
	}
	c.flushLast(ctx, ps)
	clear(ps.stored)
}

// doubtful returns the stream sequence of msg when it is a redelivery that neither this member's
// recent acknowledgements (ps.recent) nor the commit marker (ps.inherited) accounts for: its effects may or
// may not be durable.
func (c *Consumer) doubtful(ps *partition, msg jetstream.Msg) (uint64, bool) {
	md, err := msg.Metadata()
	if err != nil || md.NumDelivered <= 1 {
		return 0, false
	}
	seq := md.Sequence.Stream
	if ps.recent.has(seq) {
		return 0, false
	}
	if _, committed := ps.inherited[seq]; committed {
		return 0, false
	}
	return seq, true
}

// checkStored asks the storedCheck, in one call, about the doubtful redeliveries among msgs
// not asked about yet, and records the answers in ps.stored. A failed check records false for
// all of them (handled again).
func (c *Consumer) checkStored(ctx context.Context, ps *partition, msgs []jetstream.Msg) {
	var ds []Delivery
	for _, m := range msgs {
		seq, ok := c.doubtful(ps, m)
		if !ok {
			continue
		}
		if _, asked := ps.stored[seq]; asked {
			continue
		}
		ds = append(ds, Delivery{
			Cluster:   clusterOf(m.Subject(), c.cfg.SubjectPrefix),
			Partition: ps.p,
			ID:        m.Headers().Get(nats.MsgIdHdr),
			Payload:   m.Data(),
			Sequence:  seq,
		})
	}
	if len(ds) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	has, err := c.callStored(cctx, ds)
	if err == nil && len(has) != len(ds) {
		err = fmt.Errorf("stored check: %d answers for %d messages", len(has), len(ds))
	}
	if err != nil {
		c.storedFails.Add(ctx, 1)
		if !ps.storedLogged && ctx.Err() == nil {
			ps.storedLogged = true
			ps.log.Warn("check whether redelivered messages are stored failed; they are handled again (logged once per takeover)",
				"messages", len(ds), "err", err)
		}
		has = make([]bool, len(ds))
	}
	for i, d := range ds {
		ps.stored[d.Sequence] = has[i]
	}
}

// callStored runs the storedCheck, turning a panic into an error.
func (c *Consumer) callStored(ctx context.Context, ds []Delivery) (has []bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("natsqueue: stored check panicked: %v", r)
		}
	}()
	return c.stored(ctx, ds)
}

// flushLast flushes the accepted messages at the end of a batch. When ctx (stopping) or the
// pull (reassigned) ended, the commit is tried once, bounded by PublishTimeout, and the messages
// go back to the server when it fails.
func (c *Consumer) flushLast(ctx context.Context, ps *partition) {
	if len(ps.done) == 0 {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PublishTimeout)
		defer cancel()
	}
	c.flush(ctx, ps)
}

// handle runs the handler on msg, retrying in place so that later messages of the partition
// never overtake a failing one; an accepted message joins ps.done, one that keeps failing is
// dead-lettered. It returns false, leaving msg alone, when ctx or the pull ended first.
func (c *Consumer) handle(ctx context.Context, ps *partition, msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil {
		ps.log.Warn("message without JetStream metadata, terminated", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return true
	}
	seq := md.Sequence.Stream
	d := Delivery{
		Cluster:   clusterOf(msg.Subject(), c.cfg.SubjectPrefix),
		Partition: ps.p,
		ID:        msg.Headers().Get(nats.MsgIdHdr),
		Payload:   msg.Data(),
		Sequence:  seq,
		Attempt:   int(md.NumDelivered),
	}
	if first, dup := ps.secondCopy(d.ID, seq); dup {
		if !ps.dupLogged {
			ps.dupLogged = true
			ps.log.Info("a second copy of a message handled just before (a retried publish the stream stored twice), acknowledged without handling it (logged once per takeover)",
				"seq", seq, "first_seq", first, "id", d.ID)
		}
		ps.seen = max(ps.seen, seq)
		c.duplicates.Add(ctx, 1)
		_ = msg.Ack()
		return true
	}
	if i := ps.pending(seq); i >= 0 {
		// A redelivery of a message accepted in this batch and not committed yet: its AckWait
		// ran out while it waited in the pull's buffer behind a stalled commit (a stream leader
		// change). Handling it again would write its spans twice. The accepted message goes on
		// with this delivery, the one the server now waits for: its ack after the commit (by
		// stream sequence) covers both, and a give-back's Nak of an older delivery would be
		// ignored until AckWait.
		ps.done[i].msg = msg
		c.skipped.Add(ctx, 1)
		return true
	}
	// A message this member committed comes back as a first delivery when the server lost its
	// consumer's state for it (a restart before that state reached its disk): it is stale all
	// the same. (Its ID and sequence both match: a stream recreated under the same name, whose
	// sequences start again, does not make a new message look committed.)
	if md.NumDelivered > 1 || ps.knownCommitted(d.ID, seq) {
		stale := ps.recent.has(seq)
		_, committed := ps.inherited[seq]
		stored := !stale && !committed && ps.stored[seq]
		if stale || committed || stored {
			if c.warmer != nil && seq > ps.seen {
				// Committed (or stored) by the previous holder, or by this member before it
				// lost the partition and got it back (stale), after what the warm-up replayed:
				// the warm-up stopped before this message and replayed older versions of its
				// object, so the state sees it again as if it had been handled here.
				c.callWarmer(ctx, ps.log, d)
			}
			switch {
			case committed && !stale && !ps.logged:
				ps.logged = true
				ps.log.Info("redelivery of a message the previous holder committed, acknowledged without handling it again (logged once per takeover)",
					"seq", seq, "id", d.ID)
			case stored && !ps.storedLogged:
				ps.storedLogged = true
				ps.log.Info("redelivery of a message whose spans are stored already, acknowledged without handling it again (logged once per takeover)",
					"seq", seq, "id", d.ID)
			}
			ps.seen = max(ps.seen, seq)
			if stored {
				c.storedSkipped.Add(ctx, 1)
			} else {
				c.skipped.Add(ctx, 1)
			}
			_ = msg.Ack()
			return true
		}
	}
	if d.Attempt > 1 {
		c.redelivered.Add(ctx, 1)
	}
	backoff := c.cfg.RetryBackoff
	var herr error
	for d.Attempt <= c.cfg.MaxDeliveries {
		herr = c.call(ctx, d)
		if herr == nil {
			if len(ps.done) == 0 {
				ps.since = time.Now()
			}
			ps.done = append(ps.done, accepted{msg: msg, d: d})
			ps.accept(d.ID, seq)
			ps.seen = max(ps.seen, seq)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		// The messages accepted before this one do not wait for its retries.
		c.flush(ctx, ps)
		if ps.pctx.Err() != nil {
			return false
		}
		if d.Attempt == c.cfg.MaxDeliveries {
			break
		}
		if !sleep(ctx, backoff) {
			return false
		}
		_ = msg.InProgress()
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
		d.Attempt++
		c.redelivered.Add(ctx, 1)
	}
	if herr == nil {
		herr = fmt.Errorf("delivered %d times", d.Attempt)
	}
	c.deadLetter(ctx, ps, msg, d, herr)
	return true
}

// flush commits the accepted messages of ps.done and acknowledges them, all at once, each ack
// waiting for the server's confirmation. When the commit cannot be made before the pull ends,
// they go back to the server.
func (c *Consumer) flush(ctx context.Context, ps *partition) {
	if len(ps.done) == 0 {
		return
	}
	if !c.commitBatch(ctx, ps) {
		c.giveBack(ps)
		return
	}
	c.waitHistory(ctx, ps)
	for _, a := range ps.done {
		ps.remember(a.d.Sequence)
	}
	c.putMark(ctx, ps)
	if c.crashBeforeAcks != nil && c.crashBeforeAcks(ps.p) {
		clear(ps.done)
		ps.done = ps.done[:0]
		return
	}
	errs := c.ackAll(ctx, ps.done)
	confirmed := 0
	for i, a := range ps.done {
		if errs[i] != nil {
			ps.log.Debug("ack", "seq", a.d.Sequence, "err", errs[i])
			continue
		}
		confirmed++
		if c.onAck != nil {
			c.onAck(a.d)
		}
	}
	c.consumed.Add(ctx, int64(confirmed))
	clear(ps.done)
	ps.done = ps.done[:0]
}

// ackAll acknowledges msgs all at once (one goroutine each, at most MaxInFlight), each waiting
// for the server's confirmation, and returns the error of each. All acks go out together so
// that a crash leaves as few committed, unacknowledged messages as it can (their redelivery
// would write their spans again), and each is confirmed: a lost ack leaves its message
// unconfirmed, and its redelivery is recognised as stale.
func (c *Consumer) ackAll(ctx context.Context, msgs []accepted) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 1 {
		errs[0] = c.ack(ctx, msgs[0].msg)
		return errs
	}
	var wg sync.WaitGroup
	for i := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.ack(ctx, msgs[i].msg)
		}()
	}
	wg.Wait()
	return errs
}

// commitBatch calls the Committer until it succeeds, with a backoff, keeping the batch's
// messages in progress meanwhile. It returns false when the pull ended first.
func (c *Consumer) commitBatch(ctx context.Context, ps *partition) bool {
	if c.commit == nil {
		return true
	}
	backoff := c.cfg.RetryBackoff
	for failures := 0; ; failures++ {
		err := c.commit(ctx)
		if err == nil {
			if failures > 0 {
				ps.log.Info("commit succeeded after failures", "failures", failures, "messages", len(ps.done))
			}
			return true
		}
		if failures == 0 && ctx.Err() == nil {
			ps.log.Warn("commit of handled messages failed, retrying", "messages", len(ps.done), "err", err)
		}
		if !sleep(ps.pctx, backoff) {
			return false
		}
		for _, a := range ps.done {
			_ = a.msg.InProgress()
		}
		backoff = min(backoff*2, c.cfg.MaxRetryBackoff)
	}
}

// giveBack returns the accepted messages not acknowledged to the server, oldest first, for a
// later delivery (here or to the member taking the partition over).
func (c *Consumer) giveBack(ps *partition) {
	for _, a := range ps.done {
		_ = a.msg.Nak()
	}
	clear(ps.done)
	ps.done = ps.done[:0]
}

// deadLetter moves msg to the dead-letter stream and acknowledges it; when that fails the
// message goes back to the server for a later attempt.
func (c *Consumer) deadLetter(ctx context.Context, ps *partition, msg jetstream.Msg, d Delivery, cause error) {
	dm := nats.NewMsg(deadSubject(c.cfg, d.Cluster, ps.p))
	dm.Data = msg.Data()
	reason := cause.Error()
	if len(reason) > 512 {
		reason = reason[:512]
	}
	dm.Header.Set(headerOriginalSubject, msg.Subject())
	dm.Header.Set(headerDeliveries, strconv.Itoa(d.Attempt))
	dm.Header.Set(headerError, reason)
	dm.Header.Set(nats.MsgIdHdr, c.cfg.Stream+"-dead-"+strconv.FormatUint(d.Sequence, 10))
	pctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	if _, err := c.js.PublishMsg(pctx, dm); err != nil {
		ps.log.Warn("move message to dead-letter stream, retrying later", "seq", d.Sequence, "err", err)
		_ = msg.NakWithDelay(c.cfg.MaxRetryBackoff)
		return
	}
	ps.remember(d.Sequence)
	if err := c.ack(ctx, msg); err != nil {
		ps.log.Debug("ack dead-lettered message", "seq", d.Sequence, "err", err)
		return
	}
	c.deadLettered.Add(ctx, 1)
	ps.log.Warn("message moved to dead-letter stream", "seq", d.Sequence, "id", d.ID,
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

// ack acknowledges msg and waits for the server's confirmation, for PublishTimeout at most even
// when ctx ends (stopping): the message was handled and committed.
func (c *Consumer) ack(ctx context.Context, msg jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PublishTimeout)
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
