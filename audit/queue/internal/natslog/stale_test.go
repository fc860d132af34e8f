package natslog

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
)

// fakeMsg is a redelivered message for the unit tests of handle: only Metadata, Data, Headers,
// Subject and Ack matter.
type fakeMsg struct {
	jetstream.Msg
	seq, delivered uint64
	acked          bool
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: m.delivered}, nil
}
func (m *fakeMsg) Data() []byte         { return payload("apps/deployments/default/d0", int(m.seq)) }
func (m *fakeMsg) Headers() nats.Header { return nats.Header{} }
func (m *fakeMsg) Subject() string      { return "kelemetry.audit.c1.0" }
func (m *fakeMsg) Ack() error           { m.acked = true; return nil }

// handleTestConsumer is a Consumer for the unit tests of handle, with no connection: its handler
// records the stream sequences it is given in *handled.
func handleTestConsumer() (*Consumer, *[]uint64) {
	handled := &[]uint64{}
	m := noop.NewMeterProvider().Meter("test")
	skipped, _ := m.Int64Counter("skipped")
	redelivered, _ := m.Int64Counter("redelivered")
	return &Consumer{
		cfg: testConfig("nats://127.0.0.1:1").WithDefaults(),
		log: slog.Default(),
		h: func(_ context.Context, d Delivery) error {
			*handled = append(*handled, d.Sequence)
			return nil
		},
		skipped:     skipped,
		redelivered: redelivered,
	}, handled
}

// A redelivery of a message this member committed (stale: its ack was lost) that comes first
// after the member got its partition back is warmed: the warm-up stopped before it and replayed
// older versions of its object. One at or below what the member saw is only acknowledged.
func TestStaleRedeliveryAfterTakeoverWarms(t *testing.T) {
	var warmed []uint64
	c, handled := handleTestConsumer()
	c.warmer = func(_ context.Context, d Delivery) { warmed = append(warmed, d.Sequence) }
	ps := &partition{p: 0, log: slog.Default(), recent: newLastN[uint64, struct{}](8), inherited: map[uint64]struct{}{},
		stored: map[uint64]bool{}, pctx: context.Background(), since: time.Now()}
	for _, seq := range []uint64{3, 4, 5} {
		ps.remember(seq)
	}
	ps.seen = 4 // after a takeover whose first message is 5: the warm-up replayed up to 4
	ctx := context.Background()

	first := &fakeMsg{seq: 5, delivered: 2}
	require.True(t, c.handle(ctx, ps, first))
	assert.True(t, first.acked)
	assert.Equal(t, []uint64{5}, warmed, "the stale redelivery past the warm-up is warmed")
	assert.Empty(t, *handled, "and not handled again")

	again := &fakeMsg{seq: 4, delivered: 3}
	require.True(t, c.handle(ctx, ps, again))
	assert.True(t, again.acked)
	assert.Equal(t, []uint64{5}, warmed, "a stale redelivery already seen is only acknowledged")
	assert.Empty(t, *handled)
}

// A redelivery of a message accepted in the batch in progress (its AckWait ran out in the pull's
// buffer while a commit before it stalled) is not handled again, nor acknowledged before the
// commit: the accepted message is acknowledged (or given back) through the latest delivery. A
// redelivery of another message is handled.
func TestRedeliveryOfPendingMessageIsNotHandled(t *testing.T) {
	c, handled := handleTestConsumer()
	ps := &partition{p: 0, log: slog.Default(), recent: newLastN[uint64, struct{}](8), inherited: map[uint64]struct{}{},
		stored: map[uint64]bool{}, pctx: context.Background(), since: time.Now(), ids: newLastN[string, uint64](8)}
	ctx := context.Background()
	batch := []*fakeMsg{{seq: 7, delivered: 1}, {seq: 8, delivered: 1}, {seq: 7, delivered: 2}, {seq: 6, delivered: 2}}
	for _, msg := range batch {
		require.True(t, c.handle(ctx, ps, msg))
	}
	assert.Equal(t, []uint64{7, 8, 6}, *handled, "the second delivery of 7 is not handled; 6 was never accepted here")
	for _, msg := range batch {
		assert.False(t, msg.acked, "nothing is acknowledged before the commit (seq %d attempt %d)", msg.seq, msg.delivered)
	}
	require.Len(t, ps.done, 3)
	assert.Same(t, batch[2], ps.done[0].msg, "7 waits for the commit with its latest delivery")
	assert.Equal(t, 1, ps.done[0].d.Attempt, "as the delivery that was handled")
}
