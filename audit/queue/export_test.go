package queue

import (
	"context"
	"testing"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue/internal/natslog"
	"github.com/kelemetry/kelemetry/natsqueue"
)

// What the pipeline tests of package queue_test (a queue with the audit consumer) need of the
// package's insides.

// Ctx is testCtx.
func Ctx(t *testing.T) context.Context { return testCtx(t) }

// NATSTestConfig is natsTestConfig.
func NATSTestConfig(url string) natsqueue.Config { return natsTestConfig(url) }

// AppendBatch is the durable and NATS record of a batch.
func AppendBatch(b []byte, cluster string, events []*auditv1.Event) []byte {
	return appendBatch(b, cluster, events)
}

// StoredMsgs is q.storedMsgs.
func StoredMsgs(ctx context.Context, q Queue, ds []natslog.Delivery) ([]bool, error) {
	return q.(*natsQueue).storedMsgs(ctx, ds)
}
