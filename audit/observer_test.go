package audit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kelemetry/kelemetry/audit/queue"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// recordingObserver keeps the batches it saw.
type recordingObserver struct {
	mu      sync.Mutex
	batches [][]*auditv1.Event
}

func (o *recordingObserver) ObserveAudit(_ string, events []*auditv1.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches = append(o.batches, events)
}

func (o *recordingObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, b := range o.batches {
		n += len(b)
	}
	return n
}

// fullQueue refuses every batch.
type fullQueue struct{ queue.Queue }

func (fullQueue) Enqueue(context.Context, string, []*auditv1.Event) error { return queue.ErrFull }
func (fullQueue) EnqueueWait(context.Context, string, []*auditv1.Event) error {
	return queue.ErrStopped
}

// TestObserveSeesAcceptedBatchesOnly: an observer sees what the queue accepted, reads included,
// and not a batch the queue refused (kube-apiserver retries it: it would count twice).
func TestObserveSeesAcceptedBatchesOnly(t *testing.T) {
	var handled []*auditv1.Event
	var mu sync.Mutex
	q, err := queue.New(queue.Config{}, queue.Deps{Handle: func(_ context.Context, _ string, ev *auditv1.Event) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, ev)
	}})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{}
	oq := observe(q, obs, nil)
	ctx := context.Background()
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Stop(ctx) }()
	read := &auditv1.Event{AuditID: "r", Stage: "ResponseComplete", Verb: "list"}
	write := &auditv1.Event{AuditID: "w", Stage: "ResponseComplete", Verb: "create"}
	if err := oq.Enqueue(ctx, "c", []*auditv1.Event{read}); err != nil {
		t.Fatal(err)
	}
	if err := oq.EnqueueWait(ctx, "c", []*auditv1.Event{write}); err != nil {
		t.Fatal(err)
	}
	if err := oq.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(handled) != 2 {
		t.Errorf("queue handled %d events, want 2", len(handled))
	}
	mu.Unlock()
	if obs.count() != 2 {
		t.Errorf("observer saw %d events, want 2", obs.count())
	}
	refused := &recordingObserver{}
	fq := observe(fullQueue{q}, refused)
	if err := fq.Enqueue(ctx, "c", []*auditv1.Event{read}); !errors.Is(err, queue.ErrFull) {
		t.Fatalf("Enqueue: %v", err)
	}
	if err := fq.EnqueueWait(ctx, "c", []*auditv1.Event{read}); !errors.Is(err, queue.ErrStopped) {
		t.Fatalf("EnqueueWait: %v", err)
	}
	if refused.count() != 0 {
		t.Errorf("observer saw %d refused events", refused.count())
	}
	if observe(q) != queue.Queue(q) {
		t.Error("Observe without observers wraps the queue")
	}
}
