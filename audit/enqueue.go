package audit

import (
	"context"
	"errors"
)

// Enqueuer accepts decoded audit events for processing. Enqueue takes a whole batch or none of it:
// it returns an error wrapping ErrQueueFull when the batch does not fit, so the caller can shed load
// (the webhook answers 429 and kube-apiserver retries the batch).
type Enqueuer interface {
	Enqueue(ctx context.Context, cluster string, events []*Event) error
}

// ErrQueueFull means the queue has no room for the batch now.
var ErrQueueFull = errors.New("audit queue full")

// ErrStopped means the queue no longer accepts events because it is shutting down.
var ErrStopped = errors.New("audit queue stopped")
