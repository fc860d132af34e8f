package auditlog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue"
)

// newTestQueue is an in-memory queue handled by h, stopped when the test ends.
func newTestQueue(t *testing.T, cfg queue.Config, h queue.Handler) queue.Queue {
	t.Helper()
	q, err := queue.New(cfg, queue.Deps{Handle: h})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Stop(ctx)
	})
	return q
}

// handledOrder records the audit IDs a queue handler saw, by object name, in handling order.
type handledOrder struct {
	mu     sync.Mutex
	byName map[string][]string
	n      int
}

func (h *handledOrder) handle(_ context.Context, _ string, ev *auditv1.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byName == nil {
		h.byName = map[string][]string{}
	}
	h.byName[ev.ObjectRef.Name] = append(h.byName[ev.ObjectRef.Name], ev.AuditID)
	h.n++
}

func (h *handledOrder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// blockingEnqueuer never has room: EnqueueWait says it was entered, then waits for its context.
type blockingEnqueuer struct{ entered chan struct{} }

func (b blockingEnqueuer) EnqueueWait(ctx context.Context, _ string, _ []*auditv1.Event) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}
