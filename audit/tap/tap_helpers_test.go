package tap

import (
	"context"
	"sync"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// recordingQueue is the queue of a webhook under test: it records what was enqueued.
type recordingQueue struct {
	mu      sync.Mutex
	batches []recordedBatch
}

type recordedBatch struct {
	cluster string
	events  []*auditv1.Event
}

func (q *recordingQueue) Enqueue(_ context.Context, cluster string, events []*auditv1.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches = append(q.batches, recordedBatch{cluster: cluster, events: events})
	return nil
}

func (q *recordingQueue) recorded() []recordedBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]recordedBatch(nil), q.batches...)
}
