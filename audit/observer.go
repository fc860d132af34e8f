package audit

import (
	"context"

	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// Observer sees every decoded audit event that the webhook, log replay or log follow handed to
// the queue, whatever its verb or stage (the consumer ignores reads; an observer may not). The
// pipeline calls ObserveAudit once per batch the queue accepted, on the producer's goroutine: it
// must return quickly without blocking (hand the batch to a bounded buffer of its own, counting
// what it drops), and it must neither modify nor keep modifying access to the events (they are
// shared with the consumer; reading them later is safe).
type Observer interface {
	ObserveAudit(cluster string, events []*auditv1.Event)
}

// ObserverGroup is the fx value group tag of the Observers that New attaches to the pipeline:
// provide one with fx.Annotate(ctor, fx.As(new(audit.Observer)), fx.ResultTags(audit.ObserverGroup)).
const ObserverGroup = `group:"kelemetry.audit.observers"`

// observe returns q with every batch it accepts (Enqueue or EnqueueWait without error) also
// passed to each observer. Without observers it returns q itself.
func observe(q queue.Target, observers ...Observer) queue.Target {
	var obs []Observer
	for _, o := range observers {
		if o != nil {
			obs = append(obs, o)
		}
	}
	if len(obs) == 0 {
		return q
	}
	return &observedQueue{Target: q, obs: obs}
}

// observedQueue is an Queue that tells observers about the batches it accepted.
type observedQueue struct {
	queue.Target
	obs []Observer
}

func (q *observedQueue) Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error {
	if err := q.Target.Enqueue(ctx, cluster, events); err != nil {
		return err
	}
	q.notify(cluster, events)
	return nil
}

func (q *observedQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	if err := q.Target.EnqueueWait(ctx, cluster, events); err != nil {
		return err
	}
	q.notify(cluster, events)
	return nil
}

func (q *observedQueue) notify(cluster string, events []*auditv1.Event) {
	for _, o := range q.obs {
		o.ObserveAudit(cluster, events)
	}
}
