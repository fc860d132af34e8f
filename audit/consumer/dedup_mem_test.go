package consumer

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/heaptest"
)

// sentCounter counts the events sent and keeps none of them.
type sentCounter struct{ n atomic.Int64 }

func (a *sentCounter) Send(context.Context, *aggregator.Event) error {
	a.n.Add(1)
	return nil
}

// TestConsumerDedupHeapPerEvent: the repeated-delivery check keeps a small fixed entry per event
// it remembers: 50,000 events take less than 60 bytes of heap each (about 90 with an LRU), and
// each is remembered.
func TestConsumerDedupHeapPerEvent(t *testing.T) {
	ctx := context.Background()
	agg := &sentCounter{}
	c, err := New(Config{DedupSize: 100_000, Diff: diff.StreamConfig{Disabled: true}}, Deps{Aggregator: agg})
	require.NoError(t, err)
	const n = 50_000
	events := make([]*auditv1.Event, n)
	for i := range events {
		ev := consumerEvent()
		ev.AuditID = "audit-" + strconv.Itoa(i)
		events[i] = ev
	}
	c.Handle(ctx, "c", consumerEvent()) // warm up
	before := heaptest.Live()
	for _, ev := range events {
		c.Handle(ctx, "c", ev)
	}
	after := heaptest.Live()
	perEvent := (int64(after) - int64(before)) / n
	t.Logf("%d bytes of heap per event remembered", perEvent)
	assert.Less(t, perEvent, int64(60))
	require.EqualValues(t, n+1, agg.n.Load())
	for _, ev := range events {
		c.Handle(ctx, "c", ev)
	}
	assert.EqualValues(t, n+1, agg.n.Load(), "every repeat dropped")
	runtime.KeepAlive(events)
}
