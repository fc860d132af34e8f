package webhook

import (
	"context"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// AcceptedBatch is a batch the webhook accepted (answered 200), as a BatchTap sees it.
type AcceptedBatch struct {
	// Cluster is the cluster the batch was accepted for.
	Cluster string
	// Body is the request body as received (decompressed): an audit.k8s.io/v1 EventList. It is
	// never modified nor reused; a tap must not modify it either.
	Body []byte
	// Dropped lists, in increasing order, the indexes of the items of Body that the webhook
	// dropped (for their timestamps); nil when it kept them all.
	Dropped []int
	// Events is the number of items accepted (the items of Body minus Dropped).
	Events int
}

// BatchTap is told about each batch a Webhook accepted, after the batch was enqueued and before
// the 200 is written. Accepted must not block: a tap that does slow work (writing a file,
// sending the batch on) buffers the batch, within a bound, and does it in the background. The
// audit dump (Dumper) and forward (Forwarder) are taps.
type BatchTap interface {
	Accepted(ctx context.Context, b AcceptedBatch)
}

// notifyTaps tells the taps about an accepted batch: body as received, received the events it
// decoded (in order) and kept those it enqueued (a subsequence of received).
func (w *Webhook) notifyTaps(ctx context.Context, cluster string, body []byte, received, kept []*auditv1.Event) {
	if len(w.taps) == 0 || len(kept) == 0 {
		return
	}
	b := AcceptedBatch{Cluster: cluster, Body: body, Events: len(kept)}
	if len(kept) < len(received) {
		j := 0
		for i, ev := range received {
			if j < len(kept) && kept[j] == ev {
				j++
				continue
			}
			b.Dropped = append(b.Dropped, i)
		}
	}
	for _, t := range w.taps {
		t.Accepted(ctx, b)
	}
}
