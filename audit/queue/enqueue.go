package queue

import (
	"context"
	"errors"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/internal/bodybuf"
)

// Enqueuer accepts decoded audit events for processing. Enqueue takes a whole batch or none of it:
// it returns an error wrapping ErrFull when the batch does not fit, so the caller can shed load
// (the webhook answers 429 and kube-apiserver retries the batch).
type Enqueuer interface {
	Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error
}

// ErrFull means the queue has no room for the batch now.
var ErrFull = errors.New("audit queue full")

// ErrUnavailable means the queue cannot take the batch now because what it stores batches in
// is unreachable (NATS, for the NATS queue): the webhook answers 503 with Retry-After and the
// reason, and the sender retries.
var ErrUnavailable = errors.New("audit queue unavailable")

// ErrStopped means the queue no longer accepts events because it is shutting down.
var ErrStopped = errors.New("audit queue stopped")

// Target is what sources enqueue into and /healthz reads: the producer side of a Queue, of a
// wrapper of one (audit.Observe, audit.Prefilter) or of a kelemetrix.Processor.
type Target interface {
	Enqueuer
	WaitEnqueuer
	// Flush waits until every event enqueued before the call has been handled.
	Flush(ctx context.Context) error
	// Len returns the number of events accepted and not yet handled.
	Len() int
	// Bytes returns the estimated memory (auditv1.EventBytes) of the events Len counts.
	Bytes() int64
}

// Queue sits between the producers of audit events (the webhook, log replay and follow) and the
// consumer: it keeps each object's events in order while objects run in parallel. New picks the
// implementation from Config: in memory, durable on local disk, or on NATS JetStream.
type Queue interface {
	Target
	// Health returns an error wrapping ErrUnavailable while the queue cannot take batches (the
	// durable queue's log cannot be written, NATS is out of reach); nil for the memory queue.
	Health(ctx context.Context) error
	// Direct is where sources that can read their input again after a crash (log replay and
	// follow) enqueue: the durable queue's in-memory stage, without a copy on disk; the queue
	// itself for the others.
	Direct() Target
	// Kind names the implementation: "memory", "durable" or "nats".
	Kind() string
	// Start starts the workers (and connects, for NATS); it does not block.
	Start(ctx context.Context) error
	// Stop stops taking events, hands what was accepted to the handler (as far as ctx allows) and
	// waits for the workers. It is safe without Start.
	Stop(ctx context.Context) error
}

var (
	_ Queue = (*memQueue)(nil)
	_ Queue = (*durableQueue)(nil)
	_ Queue = (*natsQueue)(nil)

	_ bodybuf.ReleasingEnqueuer = (*memQueue)(nil)
	_ bodybuf.ReleasingEnqueuer = (*durableQueue)(nil)
)

// WaitEnqueuer takes batches of events, waiting for room instead of dropping. *Queue is one.
type WaitEnqueuer interface {
	EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error
}

// EnqueueParts is q.Enqueue for a source that answers for a whole request (an OTLP export, a
// Kafka poll): a batch the queue can never take whole (ErrBatchTooLarge) is split in halves,
// enqueued in order, down to single events, instead of being refused for ever. It returns the
// first other error, and ErrBatchTooLarge only for a single event larger than the queue. Parts
// queued before a failure stay queued: the sender's retry of the whole request queues them
// again, which makes no duplicate spans (their IDs are deterministic).
func EnqueueParts(ctx context.Context, q Enqueuer, cluster string, events []*auditv1.Event) error {
	err := q.Enqueue(ctx, cluster, events)
	if len(events) < 2 || !errors.Is(err, ErrBatchTooLarge) {
		return err
	}
	half := len(events) / 2
	if err := EnqueueParts(ctx, q, cluster, events[:half]); err != nil {
		return err
	}
	return EnqueueParts(ctx, q, cluster, events[half:])
}
