package queue

import (
	"context"

	"github.com/kelemetry/kelemetry/telemetry"
)

// Deps are what a queue needs from the rest of the pipeline. They are given to New: nothing is
// set on a queue after it was built.
type Deps struct {
	// Handle is called for each event, in order per object (required).
	Handle Handler
	// Sync makes the spans of handled events survive a crash of the process
	// (aggregator.Engine.SyncSinks). The durable and NATS queues count a batch as handled only
	// after a call that started once it was handled returned nil (one call serves a partition's
	// batch; concurrent partitions share one). Unset: a batch is handled once its events were.
	Sync func(ctx context.Context) error
	// Warm (NATS) rebuilds the consumer's state from events handled before this replica took
	// their partition (Consumer.Warm): when it starts processing a partition it did not hold
	// (first start, takeover, rebalancing), the partition's recent messages are decoded and
	// passed to it, in order, before the first message is handled.
	Warm Handler
	// Stored (NATS) tells, for a message redelivered after its previous holder died without
	// committing it, whether its spans were written all the same (Consumer.Stored): such a
	// message is acknowledged without being handled again (and warms the diff instead), so that a
	// store that keeps every copy of a span (Jaeger) holds it once.
	Stored StoredFunc
	// Telemetry gives the logger and meter provider (either may be unset).
	Telemetry telemetry.Settings
}

// New returns the queue cfg asks for: on NATS JetStream when cfg.IsNATS(), durable on local disk
// when cfg.IsDurable(), else in memory. It does not start it.
func New(cfg Config, d Deps) (Queue, error) {
	// Each case returns a nil interface, not a nil pointer in one, with its error.
	switch {
	case cfg.IsNATS():
		q, err := newNATS(cfg.NATS, d)
		if err != nil {
			return nil, err
		}
		return q, nil
	case cfg.IsDurable():
		q, err := newDurable(cfg, d)
		if err != nil {
			return nil, err
		}
		return q, nil
	default:
		q, err := newMemory(cfg, d)
		if err != nil {
			return nil, err
		}
		return q, nil
	}
}

// Health of the memory queue: it is never unavailable.
func (q *memQueue) Health(context.Context) error { return nil }

// Direct of the memory queue is the queue itself.
func (q *memQueue) Direct() Target { return q }

// Direct of the NATS queue is the queue itself: replayed events reach the replicas that own their
// partitions.
func (q *natsQueue) Direct() Target { return q }

// Kind of the memory queue.
func (q *memQueue) Kind() string { return "memory" }

// Kind of the durable queue.
func (d *durableQueue) Kind() string { return "durable" }

// Kind of the NATS queue.
func (q *natsQueue) Kind() string { return "nats" }
