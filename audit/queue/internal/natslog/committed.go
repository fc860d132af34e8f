package natslog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// The commit marker closes most of the window between a batch's commit and its
// acknowledgement. After the Committer returned nil (and before the acks go out) the partition's
// holder puts the stream sequences of the batch into the bucket <Stream>_COMMITTED, key p<N>,
// one put per batch. A member taking the partition over (or a restarted process) reads the
// marker, and a redelivery of one of its sequences is acknowledged without being handled again:
// its effects are durable and the takeover's warm-up replays it from the history. A crash now
// writes spans twice only when it falls between the commit and the marker's confirmation (one
// round trip), not between the commit and the last of the batch's acks.
//
// The marker holds the batch's sequences, not a high-water mark: a message another member (or a
// previous process) pulled and never acknowledged comes back after AckWait behind newer ones, so
// an older sequence than the last one committed is not necessarily committed. (An AckAll consumer
// policy, acknowledging a batch with one ack of its last message, is not available: the audit
// stream is a work queue, and JetStream requires explicit acks on work queues.)

func committedBucket(c natsqueue.Config) string { return c.Stream + "_COMMITTED" }

// markKey is the commit marker's key of partition p.
func markKey(p int) string { return "p" + strconv.Itoa(p) }

func ensureMarks(ctx context.Context, js jetstream.JetStream, cfg natsqueue.Config) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      committedBucket(cfg),
		Description: "Per audit partition: the stream sequences of the last batch committed (sinks synced) before its acks",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create commit marker bucket %s: %w", committedBucket(cfg), classify(err))
	}
	return kv, nil
}

// encodeMark encodes sequences as comma-separated decimals (readable with `nats kv get`).
func encodeMark(seqs []uint64) []byte {
	b := make([]byte, 0, len(seqs)*8)
	for i, s := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, s, 10)
	}
	return b
}

// decodeMark decodes encodeMark's output.
func decodeMark(b []byte) ([]uint64, error) {
	var out []uint64
	start := 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] != ',' {
			continue
		}
		if i == start {
			if len(b) == 0 {
				break
			}
			return nil, errors.New("commit marker: empty sequence")
		}
		s, err := strconv.ParseUint(string(b[start:i]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("commit marker: %w", err)
		}
		out = append(out, s)
		start = i + 1
	}
	return out, nil
}

// putMark records the sequences of ps.done as committed, waiting for the server's confirmation
// for PublishTimeout at most (even when ctx ends: the batch was committed). A failure is counted
// and logged; the acks go out anyway.
func (c *Consumer) putMark(ctx context.Context, ps *partition) {
	seqs := make([]uint64, len(ps.done))
	for i, a := range ps.done {
		seqs[i] = a.d.Sequence
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.PublishTimeout)
	defer cancel()
	if _, err := c.marks.Put(pctx, markKey(ps.p), encodeMark(seqs)); err != nil {
		c.markFailures.Add(ctx, 1)
		ps.log.Debug("put commit marker", "err", err)
	}
}

// loadMark adds partition p's commit marker to ps.inherited (on a takeover). The sequences
// inherited before stay (a stream sequence is never reused, and the messages of an earlier holder
// may still be on their way back) unless they would pass 8 x MaxInFlight: then they are dropped.
// A missing marker adds nothing; a failure is logged (those redeliveries are then handled again,
// as without a marker).
func (c *Consumer) loadMark(ctx context.Context, ps *partition) {
	if len(ps.inherited) > 7*c.cfg.MaxInFlight {
		clear(ps.inherited)
	}
	gctx, cancel := context.WithTimeout(ctx, c.cfg.PublishTimeout)
	defer cancel()
	e, err := c.marks.Get(gctx, markKey(ps.p))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return
	}
	var seqs []uint64
	if err == nil {
		seqs, err = decodeMark(e.Value())
	}
	if err != nil {
		ps.log.Warn("read commit marker, redeliveries of the last batch are handled again", "err", err)
		return
	}
	for _, s := range seqs {
		ps.inherited[s] = struct{}{}
	}
}
