package consumer

import (
	"context"

	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/internal/bodybuf"
	"github.com/kelemetry/kelemetry/audit/internal/repeats"
)

// Prefilter returns q with the events that c's filter drops (by verb, stage, resource, user
// agent, or without an object reference: ConsumerConfig) left out of each batch before q
// takes it, and counted in c's kelemetry.audit.consumer.events once q accepted the rest. Such
// events would be dropped by the consumer anyway; leaving them out first spares their copy in
// the durable log or on NATS and their trip through the queue (reads and lease renewals are a
// third of a typical audit stream). Invalid events still reach the consumer, which logs them.
// Observers wrapped around the result (Observe) still see every event.
func Prefilter(q queue.Target, c *Consumer) queue.Target {
	if c == nil {
		return q
	}
	return &prefilteredQueue{Target: q, c: c}
}

type prefilteredQueue struct {
	queue.Target
	c *Consumer
}

func (q *prefilteredQueue) Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.enqueue(ctx, cluster, events, q.Target.Enqueue)
}

// EnqueueReleasing passes release on when the queue it wraps takes it
// (bodybuf.ReleasingEnqueuer), and calls it at once when every event of the batch was left out.
func (q *prefilteredQueue) EnqueueReleasing(ctx context.Context, cluster string, events []*auditv1.Event, release func()) error {
	rq, ok := q.Target.(bodybuf.ReleasingEnqueuer)
	if !ok {
		return q.Enqueue(ctx, cluster, events)
	}
	queued := false
	err := q.enqueue(ctx, cluster, events, func(ctx context.Context, cluster string, kept []*auditv1.Event) error {
		queued = true
		return rq.EnqueueReleasing(ctx, cluster, kept, release)
	})
	if err == nil && !queued {
		release()
	}
	return err
}

func (q *prefilteredQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.enqueue(ctx, cluster, events, q.Target.EnqueueWait)
}

func (q *prefilteredQueue) enqueue(ctx context.Context, cluster string, events []*auditv1.Event,
	next func(context.Context, string, []*auditv1.Event) error,
) error {
	var dropped [numOutcomes]int64
	kept := q.split(events, &dropped)
	if len(kept) > 0 || len(events) == 0 {
		if err := next(ctx, cluster, kept); err != nil {
			return err
		}
	}
	for oc, n := range dropped {
		if n > 0 {
			q.c.counter.Add(int(oc), n)
		}
	}
	return nil
}

// split returns the events the consumer would not filter and counts, by outcome, those it
// would. It returns events itself when none is filtered.
func (q *prefilteredQueue) split(events []*auditv1.Event, dropped *[numOutcomes]int64) []*auditv1.Event {
	return repeats.KeepEvents(events, func(ev *auditv1.Event) bool {
		oc, _ := q.c.conv.filter(ev)
		if oc.prefiltered() {
			dropped[oc]++
			return false
		}
		return true
	})
}

// prefiltered reports the outcomes of converter.filter that Prefilter leaves out: what the
// configuration filters, not what is invalid.
func (o outcome) prefiltered() bool {
	switch o {
	case outcomeFilteredVerb, outcomeFilteredStage, outcomeFilteredNoObjectRef, outcomeFilteredResource, outcomeFilteredUserAgent:
		return true
	}
	return false
}
