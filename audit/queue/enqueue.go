package queue

import (
	"context"
	"errors"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// Enqueuer accepts decoded audit events for processing. Enqueue takes a whole batch or none of it:
// it returns an error wrapping ErrQueueFull when the batch does not fit, so the caller can shed load
// (the webhook answers 429 and kube-apiserver retries the batch).
type Enqueuer interface {
	Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error
}

// ErrQueueFull means the queue has no room for the batch now.
var ErrQueueFull = errors.New("audit queue full")

// ErrQueueUnavailable means the queue cannot take the batch now because what it stores batches in
// is unreachable (NATS, for the NATSQueue): the webhook answers 503 with Retry-After and the
// reason, and the sender retries.
var ErrQueueUnavailable = errors.New("audit queue unavailable")

// ErrStopped means the queue no longer accepts events because it is shutting down.
var ErrStopped = errors.New("audit queue stopped")

// EventQueue is what the producers of audit events (the webhook, log replay and follow) and the
// health endpoint need from the queue in front of the consumer. *Queue (in memory),
// *DurableQueue (on local disk first) and *NATSQueue (on NATS JetStream) implement it.
type EventQueue interface {
	Enqueuer
	WaitEnqueuer
	// Flush waits until every event enqueued before the call has been handled.
	Flush(ctx context.Context) error
	// Len returns the number of events accepted and not yet handled.
	Len() int
	// Bytes returns the estimated memory (EventBytes) of the events Len counts.
	Bytes() int64
}

var (
	_ EventQueue = (*Queue)(nil)
	_ EventQueue = (*DurableQueue)(nil)
	_ EventQueue = (*NATSQueue)(nil)
)

// WaitEnqueuer takes batches of events, waiting for room instead of dropping. *Queue is one.
type WaitEnqueuer interface {
	EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error
}
