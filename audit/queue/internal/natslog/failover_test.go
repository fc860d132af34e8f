package natslog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/natstest"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// ackLog records handling and confirmed acknowledgements across members.
type ackLog struct {
	mu         sync.Mutex
	acked      map[string]int      // ID -> confirmed acks
	ackedAt    map[string][]string // ID -> stream sequence and attempt of each confirmed ack
	order      map[string][]int    // key -> payload numbers in confirmed-ack order
	partsBy    map[string]map[int]bool
	handled    int
	handledIDs map[string]bool
	afterAck   []string // IDs handled again after a confirmed ack
	confirmedN int
}

func newAckLog() *ackLog {
	return &ackLog{acked: map[string]int{}, ackedAt: map[string][]string{}, order: map[string][]int{}, partsBy: map[string]map[int]bool{}, handledIDs: map[string]bool{}}
}

func (l *ackLog) handler(member string) handler {
	return func(_ context.Context, d Delivery) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.acked[d.ID] > 0 {
			l.afterAck = append(l.afterAck, d.ID)
		}
		if l.partsBy[member] == nil {
			l.partsBy[member] = map[int]bool{}
		}
		l.partsBy[member][d.Partition] = true
		l.handled++
		l.handledIDs[d.ID] = true
		return nil
	}
}

func (l *ackLog) onAck(d Delivery) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked[d.ID]++
	l.ackedAt[d.ID] = append(l.ackedAt[d.ID], fmt.Sprintf("seq %d attempt %d", d.Sequence, d.Attempt))
	l.confirmedN++
	key, n := splitPayload(string(d.Payload))
	l.order[key] = append(l.order[key], n)
}

func (l *ackLog) parts(member string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for p := range l.partsBy[member] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// drained reports whether the stream holds no message any more (a work queue deletes a
// message once it is acknowledged) and every one of n IDs was handled.
func (l *ackLog) drained(ctx context.Context, t *testing.T, cfg natsqueue.Config, n int) bool {
	l.mu.Lock()
	handled := len(l.handledIDs)
	l.mu.Unlock()
	if handled < n {
		return false
	}
	nc, err := nats.Connect(strings.Join(cfg.URLs, ","))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ictx, cfg.WithDefaults().Stream)
	if err != nil {
		return false
	}
	return s.CachedInfo().State.Msgs == 0
}

func (l *ackLog) confirmed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.confirmedN
}

// check asserts that every ID of msgs was handled, none was handled after its confirmed
// acknowledgement nor acknowledged twice, nothing else was handled, and each key's messages were
// acknowledged in publish order. (A member killed between the server's processing of its ack
// and the confirmation leaves a message handled and acknowledged but not confirmed.)
func (l *ackLog) check(t *testing.T, msgs []Message, ordered bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Empty(t, l.afterAck, "handled after a confirmed ack")
	want := map[string]bool{}
	for _, m := range msgs {
		want[m.ID] = true
		assert.Contains(t, l.handledIDs, m.ID, "handled")
		assert.LessOrEqual(t, l.acked[m.ID], 1, "confirmed acks of %s: %v", m.ID, l.ackedAt[m.ID])
	}
	for id := range l.handledIDs {
		assert.True(t, want[id], "handled an unknown message %s", id)
	}
	assert.Len(t, l.handledIDs, len(msgs), "distinct IDs")
	if ordered {
		for key, seq := range l.order {
			assert.True(t, slices.IsSorted(seq), "ack order of %s: %v", key, seq)
		}
	}
}

func newMember(t *testing.T, cfg natsqueue.Config, log *ackLog, name string) *Consumer {
	t.Helper()
	c, err := NewConsumer(testCtx(t, 30*time.Second), cfg, log.handler(name), telemetry.Settings{})
	require.NoError(t, err)
	c.onAck = log.onAck
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func TestStandbyTakesOverPartitions(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Members = 2
	cfg.MaxInFlight = 1 // strict order across a crash
	p := newProducer(t, cfg)
	log := newAckLog()
	cfgA, cfgB := cfg, cfg
	cfgB.Member = 1
	a := newMember(t, cfgA, log, "a")
	b := newMember(t, cfgB, log, "b")
	ctx := testCtx(t, 60*time.Second)

	first := batch(20, 5, 0)
	require.NoError(t, p.Publish(ctx, first))
	require.Eventually(t, func() bool { return log.confirmed() == len(first) }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, []int{0, 2}, log.parts("a"), "member 0 holds its share")
	assert.Equal(t, []int{1, 3}, log.parts("b"), "member 1 holds its share")

	// Crash a while it is busy: publish, then kill it mid-stream.
	second := batch(20, 10, 5)
	require.NoError(t, p.Publish(ctx, second))
	a.kill()
	if !assert.Eventually(t, func() bool { return log.drained(ctx, t, cfg, len(first)+len(second)) }, 30*time.Second, 50*time.Millisecond) {
		t.Fatalf("confirmed %d of %d, partitions of b %v", log.confirmed(), len(first)+len(second), log.parts("b"))
	}
	// b took a's partitions over; it may have handled nothing of one when a handled all of that
	// partition's messages before the kill (a redelivery of a's last, committed batch is
	// acknowledged without being handled again).
	held, _ := b.assigned()
	assert.Equal(t, []int{0, 1, 2, 3}, held, "the standby took over a's partitions")
	log.check(t, append(first, second...), true)
}

func TestClusterR3NodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	nodes := natstest.Cluster(t, 3)
	cfg := testConfig(nodes[0].URL(), nodes[1].URL(), nodes[2].URL())
	cfg.Replicas = 3
	cfg.PublishTimeout = 3 * time.Second
	ctx := testCtx(t, 120*time.Second)

	var p *Producer
	require.Eventually(t, func() bool {
		var err error
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		p, err = NewProducer(actx, cfg, telemetry.Settings{})
		if err != nil {
			t.Log(err)
		}
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "cluster ready")
	t.Cleanup(p.Close)
	log := newAckLog()
	var c *Consumer
	require.Eventually(t, func() bool {
		var err error
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err = NewConsumer(actx, cfg, log.handler("c"), telemetry.Settings{})
		if err != nil {
			t.Log(err)
		}
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	c.onAck = log.onAck
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	var all []Message
	retries := 0
	stopped := ""
	for i := range 30 {
		if i == 10 {
			// Stop the stream's leader: the publishes that follow go through a leader change.
			stopped = stopLeader(ctx, t, nodes, cfg.WithDefaults().Stream)
		}
		b := batch(10, 2, 2*i)
		all = append(all, b...)
		for {
			err := p.Publish(ctx, b)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, ErrUnavailable, "batch %d", i)
			retries++
			require.NoError(t, ctx.Err())
			time.Sleep(100 * time.Millisecond) // the publisher's pause before a retry (not a wait)
		}
	}
	if !assert.Eventually(t, func() bool { return log.drained(ctx, t, cfg, len(all)) }, 60*time.Second, 100*time.Millisecond) {
		t.Fatalf("confirmed %d of %d", log.confirmed(), len(all))
	}
	time.Sleep(500 * time.Millisecond) // a quiet period, not a wait: a doubled delivery would be handled within it
	log.check(t, all, false)
	t.Logf("stopped the stream leader %s; published %d messages in 30 batches, %d batch retries, %d handler calls",
		stopped, len(all), retries, log.handled)
}

// stopLeader stops the node that leads stream and returns its name.
func stopLeader(ctx context.Context, t *testing.T, nodes []*natstest.Node, stream string) string {
	t.Helper()
	nc, err := nats.Connect(strings.Join(natstest.URLs(nodes), ","))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info := s.CachedInfo()
	require.NotNil(t, info.Cluster, "stream %s is clustered", stream)
	for _, n := range nodes {
		if n.Name() == info.Cluster.Leader {
			n.Stop()
			return n.Name()
		}
	}
	t.Fatalf("stream %s: leader %q is none of the nodes", stream, info.Cluster.Leader)
	return ""
}

// TestPartitionSpread starts 1, 2 and 3 members with static membership together and checks that
// each one processes exactly its share of the 16 partitions.
func TestPartitionSpread(t *testing.T) {
	for members := 1; members <= 3; members++ {
		t.Run(fmt.Sprintf("%d members", members), func(t *testing.T) {
			n := natstest.StartJetStream(t)
			cfg := testConfig(n.URL())
			cfg.Partitions = 16
			cfg.Members = members
			p := newProducer(t, cfg)
			log := newAckLog()
			for m := range members {
				mc := cfg
				mc.Member = m
				newMember(t, mc, log, strconv.Itoa(m))
			}
			ctx := testCtx(t, 30*time.Second)
			msgs := batch(200, 1, 0)
			require.NoError(t, p.Publish(ctx, msgs))
			require.Eventually(t, func() bool { return log.drained(ctx, t, cfg, len(msgs)) }, 20*time.Second, 50*time.Millisecond)
			for m := range members {
				var want []int
				for part := range cfg.Partitions {
					if part%members == m {
						want = append(want, part)
					}
				}
				assert.Equal(t, want, log.parts(strconv.Itoa(m)), "member %d", m)
				t.Logf("member %d of %d: partitions %v", m, members, log.parts(strconv.Itoa(m)))
			}
			log.check(t, msgs, true)
		})
	}
}
