package natslog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// warmer rebuilds a member's state from a message that was processed before this member took
// its partition over (by another member, or by this one before it lost the partition). It is
// called in stream order, before the Handler sees the partition's first message, and must only
// observe: no output, no acknowledgement (e.g. the audit-stream diff records the object's
// version without emitting a span).
type warmer func(ctx context.Context, d Delivery)

// ConsumerOption configures a Consumer beyond its Config.
type ConsumerOption func(*Consumer)

// WithWarmer makes the Consumer warm w up whenever it starts processing a partition it did not
// hold (first start, takeover after a failure, rebalancing): before the first message, w sees
// the partition's messages among the Config.WarmLookback stream messages before it, read from
// the history stream (<Stream>_HISTORY), within Config.WarmTimeout. Warm-ups are counted
// (kelemetry.natsqueue.warm.*).
func WithWarmer(w warmer) ConsumerOption {
	return func(c *Consumer) { c.warmer = w }
}

// pinHeader is the header by which the server tells a pinned member its pin ID.
const pinHeader = "Nats-Pin-Id"

// Outcomes of a warm-up, the outcome attribute of kelemetry.natsqueue.warm.takeovers.
const (
	warmComplete  = "complete"  // read every message of the lookback window
	warmTruncated = "truncated" // the history holds older messages than the window reaches
	warmTimeout   = "timeout"   // WarmTimeout ended it
	warmError     = "error"     // the history could not be read
)

// warmMetrics counts warm-ups.
type warmMetrics struct {
	takeovers metric.Int64Counter
	messages  metric.Int64Counter
	duration  metric.Float64Histogram
	outcome   map[string]metric.MeasurementOption
}

func newWarmMetrics(m *instrument.Meter) warmMetrics {
	outcomes := []string{warmComplete, warmTruncated, warmTimeout, warmError}
	outcomeSets := instrument.Sets("outcome", outcomes...)
	w := warmMetrics{
		takeovers: m.Counter("kelemetry.natsqueue.warm.takeovers",
			"Partitions this member started processing and warmed up first, by outcome (complete, truncated: "+
				"the history holds older messages than warmLookback reaches, timeout, error)", "{takeover}", outcomeSets...),
		messages: m.Counter("kelemetry.natsqueue.warm.messages", "Messages replayed to the warmer", "{message}", *attribute.EmptySet()),
		duration: m.Histogram("kelemetry.natsqueue.warm.duration", "Time a takeover spent warming up", "s",
			0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30),
		outcome: map[string]metric.MeasurementOption{},
	}
	for i, o := range outcomes {
		w.outcome[o] = metric.WithAttributeSet(outcomeSets[i])
	}
	return w
}

// takeover tracks whether a partition's pin changed since the last message.
type takeover struct {
	seen bool
	pin  string
}

// changed reports whether msg starts a new pin of the partition (including the first message
// this member receives) and records its pin.
func (t *takeover) changed(msg jetstream.Msg) bool {
	pin := msg.Headers().Get(pinHeader)
	if t.seen && pin == t.pin {
		return false
	}
	t.seen, t.pin = true, pin
	return true
}

// reset forgets the pin: the next message is a takeover (after this member released the
// partition or stopped pulling it).
func (t *takeover) reset() { t.seen = false }

// warm replays partition p's messages before stream sequence upTo from the history stream to
// the warmer, bounded by WarmLookback messages and WarmTimeout.
func (c *Consumer) warm(ctx context.Context, p int, upTo uint64, log *slog.Logger) {
	if c.warmer == nil {
		return
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, c.cfg.WarmTimeout)
	defer cancel()
	var (
		n       int
		outcome string
		err     error
	)
	// A history that cannot be read (no responders while a NATS node goes away, a stream
	// leader election) is read again from the start until WarmTimeout: warming is idempotent.
	for {
		n, outcome, err = c.replayHistory(wctx, p, upTo, log)
		if err == nil || outcome != warmError || !sleep(wctx, 100*time.Millisecond) {
			break
		}
	}
	if ctx.Err() != nil {
		return // stopping
	}
	took := time.Since(start)
	c.warmM.takeovers.Add(ctx, 1, c.warmM.outcome[outcome])
	c.warmM.duration.Record(ctx, took.Seconds())
	if err != nil {
		log.Warn("warm up partition from its history", "upTo", upTo, "messages", n, "outcome", outcome, "err", err)
		return
	}
	log.Debug("warmed up partition", "upTo", upTo, "messages", n, "outcome", outcome, "took", took)
}

func (c *Consumer) replayHistory(ctx context.Context, p int, upTo uint64, log *slog.Logger) (int, string, error) {
	outcomeOf := func(err error) string {
		if errors.Is(err, context.DeadlineExceeded) {
			return warmTimeout
		}
		return warmError
	}
	if upTo <= 1 {
		return 0, warmComplete, nil
	}
	hs, err := c.js.Stream(ctx, historyStream(c.cfg))
	if err != nil {
		return 0, outcomeOf(err), fmt.Errorf("history stream: %w", err)
	}
	// No waiting for the sourcing to catch up: every message acknowledged before upTo is in the
	// history already (sourced, or copied by the member that acknowledged it: waitHistory), and
	// one handled but not acknowledged comes back as a redelivery, warmed then when the commit
	// marker or the storedCheck accounts for it, else handled. (Waiting here could outlast the
	// pin: a member that does not pull for PinnedTTL loses its partition.)
	info := hs.CachedInfo()
	from := info.State.FirstSeq
	outcome := warmComplete
	if info.State.LastSeq > uint64(c.cfg.WarmLookback) && info.State.LastSeq-uint64(c.cfg.WarmLookback) > from {
		from = info.State.LastSeq - uint64(c.cfg.WarmLookback)
		outcome = warmTruncated
	}
	// An ephemeral consumer of the partition's subjects from the window's start; its info
	// says how many messages it will deliver, so that the reading stops without waiting.
	cons, err := hs.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubjects: []string{c.cfg.SubjectPrefix + ".*." + strconv.Itoa(p),
			c.cfg.SubjectPrefix + ".history.*." + strconv.Itoa(p)},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: c.cfg.WarmTimeout + time.Minute,
		MemoryStorage:     true,
		Replicas:          1,
	})
	if err != nil {
		return 0, outcomeOf(err), fmt.Errorf("read history: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PublishTimeout)
		defer cancel()
		_ = hs.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	pending := cons.CachedInfo().NumPending
	n := 0
	var replayed uint64 // the highest sequence replayed: a message sourced and copied is replayed once
	for pending > 0 {
		batch, err := cons.Fetch(int(min(pending, 256)), jetstream.FetchMaxWait(min(time.Second, max(time.Until(deadlineOf(ctx)), 10*time.Millisecond))))
		if err != nil {
			return n, outcomeOf(err), fmt.Errorf("read history: %w", err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				return n, warmError, fmt.Errorf("read history: %w", err)
			}
			pending = md.NumPending
			seq, ok := sourceSeq(msg.Headers())
			if !ok {
				continue
			}
			if seq >= upTo {
				return n, outcome, nil
			}
			if seq <= replayed {
				continue
			}
			replayed = seq
			c.callWarmer(ctx, log, Delivery{
				Cluster:   c.historyCluster(msg.Subject()),
				Partition: p,
				ID:        msg.Headers().Get(nats.MsgIdHdr),
				Payload:   msg.Data(),
				Sequence:  seq,
			})
			n++
			c.warmM.messages.Add(ctx, 1)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return n, outcomeOf(err), fmt.Errorf("read history: %w", err)
		}
		if got == 0 {
			if ctx.Err() != nil {
				return n, warmTimeout, fmt.Errorf("read history: %w", ctx.Err())
			}
			return n, outcome, nil // nothing more arrives: the history holds no more of p
		}
	}
	return n, outcome, nil
}

// callWarmer runs the warmer on d, logging a panic instead of ending the process: a message the
// warmer cannot cope with only leaves its object without a previous version.
func (c *Consumer) callWarmer(ctx context.Context, log *slog.Logger, d Delivery) {
	defer func() {
		if r := recover(); r != nil {
			log.Warn("warmer panicked, message skipped", "seq", d.Sequence, "panic", fmt.Sprint(r))
		}
	}()
	c.warmer(ctx, d)
}

// deadlineOf is ctx's deadline, or a second from now when it has none.
func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Second)
}

// sourceHeader is the header by which the history stream's messages carry their origin:
// "<stream> <sequence> ...".
const sourceHeader = "Nats-Stream-Source"

// sourceSeq returns the sequence in the stream of a history message: sourced (header
// Nats-Stream-Source) or copied by a consumer (headerStreamSeq).
func sourceSeq(h nats.Header) (uint64, bool) {
	if f := strings.Fields(h.Get(sourceHeader)); len(f) >= 2 {
		seq, err := strconv.ParseUint(f[1], 10, 64)
		return seq, err == nil
	}
	if v := h.Get(headerStreamSeq); v != "" {
		seq, err := strconv.ParseUint(v, 10, 64)
		return seq, err == nil
	}
	return 0, false
}

// historyCluster returns the cluster token of a history message's subject, sourced
// (<prefix>.<cluster>.<partition>) or copied (<prefix>.history.<cluster>.<partition>).
func (c *Consumer) historyCluster(subject string) string {
	if copied := c.cfg.SubjectPrefix + ".history."; strings.HasPrefix(subject, copied) {
		return clusterOf(subject, copied[:len(copied)-1])
	}
	return clusterOf(subject, c.cfg.SubjectPrefix)
}

// historyLast returns the stream sequence of the history's last message (0 when empty).
func historyLast(ctx context.Context, hs jetstream.Stream, info *jetstream.StreamInfo) (uint64, error) {
	if info.State.Msgs == 0 {
		return 0, nil
	}
	m, err := hs.GetMsg(ctx, info.State.LastSeq)
	if err != nil {
		return 0, fmt.Errorf("history stream: last message: %w", err)
	}
	// Only a sourced message tells how far the sourcing got (it copies the stream in order); a
	// consumer's copy (last while the sourcing lags) says nothing of other partitions.
	f := strings.Fields(m.Header.Get(sourceHeader))
	if len(f) < 2 {
		return 0, nil
	}
	seq, _ := strconv.ParseUint(f[1], 10, 64)
	return seq, nil
}

// waitHistory makes sure, before the batch ps.done is acknowledged (the stream then deletes its
// messages), that the history stream holds them, so that the warm-up of the next member of their
// partition sees them: it waits for the history's sourcing to reach the batch's last message, for
// HistoryWait at most (100ms while the sourcing has made no progress for HistoryWait: it is
// stalled), and then copies the messages it lacks into the history itself (copyToHistory). Only
// when the copy fails too are the messages acknowledged without being in the history (counted in
// kelemetry.natsqueue.history_lagged, and logged).
func (c *Consumer) waitHistory(ctx context.Context, ps *partition) {
	seq := ps.done[len(ps.done)-1].d.Sequence
	if c.histSeq.Load() >= seq {
		return
	}
	start := time.Now()
	bound := c.cfg.HistoryWait
	if last := c.histProgress.Load(); last != 0 && time.Since(time.Unix(0, last)) > c.cfg.HistoryWait {
		bound = min(bound, 100*time.Millisecond)
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	progress := ps.since // when the batch's first message was accepted
	for {
		if time.Since(progress) > c.cfg.AckWait/4 {
			// Keep the batch from being redelivered while the history catches up.
			for _, a := range ps.done {
				_ = a.msg.InProgress()
			}
			progress = time.Now()
		}
		c.readHistorySeq(wctx)
		if c.histSeq.Load() >= seq {
			return
		}
		wait := 2 * time.Millisecond
		if time.Since(start) > 100*time.Millisecond {
			wait = 20 * time.Millisecond // a node change: poll gently
		}
		if !sleep(wctx, wait) {
			break
		}
	}
	for _, a := range ps.done {
		_ = a.msg.InProgress() // the copy may take up to PublishTimeout
	}
	if err := c.copyToHistory(ctx, ps); err != nil {
		c.histLagged.Add(context.WithoutCancel(ctx), int64(len(ps.done)))
		ps.log.Warn("acknowledging messages the history stream does not hold: a later takeover's warm-up misses them",
			"seq", seq, "waited", time.Since(start).Round(time.Millisecond), "err", err)
	}
}

// readHistorySeq raises histSeq to the stream sequence of the history's last sourced message.
func (c *Consumer) readHistorySeq(ctx context.Context) {
	hs, err := c.js.Stream(ctx, historyStream(c.cfg))
	if err != nil {
		return
	}
	last, err := historyLast(ctx, hs, hs.CachedInfo())
	if err != nil {
		return
	}
	for cur := c.histSeq.Load(); last > cur; cur = c.histSeq.Load() {
		if c.histSeq.CompareAndSwap(cur, last) {
			c.histProgress.Store(time.Now().UnixNano())
			return
		}
	}
	if c.histProgress.Load() == 0 {
		c.histProgress.Store(time.Now().UnixNano())
	}
}

// copyToHistory publishes the messages of ps.done the history's sourcing has not reached into
// the history stream (historyCopySubject, with headerStreamSeq and a message ID so that a retry
// writes nothing twice) and waits for JetStream's acknowledgements, for PublishTimeout at most.
// A message both sourced and copied is replayed once: warm-ups skip a sequence they replayed.
func (c *Consumer) copyToHistory(ctx context.Context, ps *partition) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PublishTimeout)
	defer cancel()
	held := c.histSeq.Load()
	var futures []jetstream.PubAckFuture
	for _, a := range ps.done {
		if a.d.Sequence <= held {
			continue
		}
		m := nats.NewMsg(historyCopySubject(c.cfg, a.d.Cluster, ps.p))
		m.Data = a.d.Payload
		seq := strconv.FormatUint(a.d.Sequence, 10)
		m.Header.Set(headerStreamSeq, seq)
		m.Header.Set(nats.MsgIdHdr, c.cfg.Stream+"-history-"+seq)
		f, err := c.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("copy message %d into the history: %w", a.d.Sequence, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("copy message into the history: %w", err)
		case <-pctx.Done():
			return fmt.Errorf("copy messages into the history: %w", pctx.Err())
		}
	}
	c.histCopied.Add(ctx, int64(len(futures)))
	return nil
}
