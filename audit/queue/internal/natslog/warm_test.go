package natslog

import (
	"context"
	"fmt"
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

// fakeDiff stands in for the audit-stream diff of one member: it keeps each key's last payload
// number (the object's last version) and records, for every handled message, the version its
// diff would compare against.
type fakeDiff struct {
	mu     sync.Mutex
	last   map[string]int
	diffs  map[string][][2]int // key -> (old, new) in handling order; old -1: no previous version
	warmed int
}

func newFakeDiff() *fakeDiff { return &fakeDiff{last: map[string]int{}, diffs: map[string][][2]int{}} }

func (f *fakeDiff) handle(_ context.Context, d Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, n := splitPayload(string(d.Payload))
	old, ok := f.last[key]
	if !ok {
		old = -1
	}
	f.diffs[key] = append(f.diffs[key], [2]int{old, n})
	f.last[key] = n
	return nil
}

func (f *fakeDiff) warm(_ context.Context, d Delivery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key, n := splitPayload(string(d.Payload))
	f.last[key] = n
	f.warmed++
}

func (f *fakeDiff) handledN() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, d := range f.diffs {
		n += len(d)
	}
	return n
}

// TestTakeoverKeepsDiffsContinuous kills the member holding half of the partitions in the
// middle of a stream of updates: the standby that takes them over first rebuilds its diff state
// from the partitions' history, so that every update it handles compares against the previous
// update's new value, for every object.
func TestTakeoverKeepsDiffsContinuous(t *testing.T) {
	t.Run("history sourced", func(t *testing.T) { testTakeoverKeepsDiffsContinuous(t, false) })
	// The history's sourcing stopped (as while JetStream sets a lost node's source consumer up
	// again): the members copy what they acknowledge into the history themselves.
	t.Run("history sourcing stalled", func(t *testing.T) { testTakeoverKeepsDiffsContinuous(t, true) })
}

func testTakeoverKeepsDiffsContinuous(t *testing.T, stalled bool) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Members = 2
	cfg.MaxInFlight = 1 // strict order across a crash
	p := newProducer(t, cfg)
	ctx := testCtx(t, 90*time.Second)
	fa, fb := newFakeDiff(), newFakeDiff()
	cfgB := cfg
	cfgB.Member = 1
	a, err := NewConsumer(ctx, cfg, fa.handle, telemetry.Settings{}, WithWarmer(fa.warm))
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	b, err := NewConsumer(ctx, cfgB, fb.handle, telemetry.Settings{}, WithWarmer(fb.warm))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx))
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	js := jetStreamOf(t, cfg)
	dcfg := cfg.WithDefaults()
	if stalled {
		hs, err := js.Stream(ctx, historyStream(dcfg))
		require.NoError(t, err)
		hcfg := hs.CachedInfo().Config
		hcfg.Sources = nil
		_, err = js.UpdateStream(ctx, hcfg)
		require.NoError(t, err)
	}

	const keys, updates = 12, 40
	first := batch(keys, updates/2, 0)
	require.NoError(t, p.Publish(ctx, first))
	require.Eventually(t, func() bool { return fa.handledN()+fb.handledN() == len(first) }, 30*time.Second, 20*time.Millisecond, "first half handled: %d+%d", fa.handledN(), fb.handledN())
	require.NotZero(t, fa.handledN(), "a holds partitions")
	require.NotZero(t, fb.handledN(), "b holds partitions")

	second := batch(keys, updates/2, updates/2)
	require.NoError(t, p.Publish(ctx, second))
	require.Eventually(t, func() bool { return fa.handledN()+fb.handledN() > len(first)+keys }, 30*time.Second, 5*time.Millisecond)
	a.kill()
	t.Logf("a killed after %d+%d messages", fa.handledN(), fb.handledN())

	// Every update of every object is handled by b from now on, and each of b's diffs is continuous.
	require.Eventually(t, func() bool {
		fa.mu.Lock()
		defer fa.mu.Unlock()
		fb.mu.Lock()
		defer fb.mu.Unlock()
		for k := range keys {
			key := fmt.Sprintf("apps/deployments/default/d%d", k)
			if fa.last[key] != updates-1 && fb.last[key] != updates-1 {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "all updates handled")
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fa.mu.Lock()
	defer fa.mu.Unlock()
	tookOver := 0
	for key, ds := range fb.diffs {
		if len(fa.diffs[key]) > 0 {
			tookOver++
		}
		for _, d := range ds {
			want := d[1] - 1 // the previous update's new value (-1: the object's first write)
			assert.Equal(t, want, d[0], "%s: update %d of b compares against %d", key, d[1], d[0])
		}
	}
	assert.NotZero(t, tookOver, "b took over objects a had handled")
	assert.NotZero(t, fb.warmed, "b warmed up from the history")
	hs, err := js.Stream(ctx, historyStream(dcfg))
	require.NoError(t, err)
	info, err := hs.Info(ctx, jetstream.WithSubjectFilter(dcfg.SubjectPrefix+".history.>"))
	require.NoError(t, err)
	var copies uint64
	for _, n := range info.State.Subjects {
		copies += n
	}
	if stalled {
		// a may die between a batch's copy and its ack: b copies that message again (same ID,
		// stored once) or finds it committed.
		assert.InDelta(t, keys*updates, copies, keys, "the messages acknowledged were copied into the history")
	} else {
		assert.Zero(t, copies, "the sourcing copied everything")
	}
}

// spreadOf starts members consumers with the given static membership (0: elastic), waits until
// their assignments converge and returns each member's partitions.
func waitSpread(t *testing.T, members []*Consumer, partitions int) [][]int {
	t.Helper()
	var parts [][]int
	require.Eventually(t, func() bool {
		parts = parts[:0]
		seen := map[int]int{}
		for _, m := range members {
			ps, n := m.assigned()
			if n != len(members) {
				return false
			}
			parts = append(parts, ps)
			for _, p := range ps {
				seen[p]++
			}
		}
		if len(seen) != partitions {
			return false
		}
		for _, k := range seen {
			if k != 1 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "assignments converge: %v", parts)
	return parts
}

// TestElasticRebalance starts one member, adds a second and a third, stops one and kills
// another: each time the partitions spread evenly over the live members, every message is
// handled, and the partitions of a member that leaves or dies are taken over.
func TestElasticRebalance(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Partitions = 16
	cfg.MaxInFlight = 1
	p := newProducer(t, cfg)
	log := newAckLog()
	ctx := testCtx(t, 120*time.Second)
	total := 0
	publish := func(from int) {
		msgs := batch(32, 3, from)
		require.NoError(t, p.Publish(ctx, msgs))
		total += len(msgs)
		require.Eventually(t, func() bool { return log.drained(ctx, t, cfg, total) }, 30*time.Second, 50*time.Millisecond)
	}
	spread := func(ms []*Consumer) string {
		parts := waitSpread(t, ms, cfg.Partitions)
		var sizes []int
		for _, ps := range parts {
			sizes = append(sizes, len(ps))
			assert.InDelta(t, cfg.Partitions/len(ms), len(ps), 1, "an even share")
		}
		return fmt.Sprint(sizes)
	}

	a := newMember(t, cfg, log, "a")
	t.Logf("1 member: %s", spread([]*Consumer{a}))
	publish(0)
	b := newMember(t, cfg, log, "b")
	start := time.Now()
	t.Logf("2 members: %s (after %s)", spread([]*Consumer{a, b}), time.Since(start))
	publish(3)
	assert.NotEmpty(t, log.parts("b"), "the new member processes partitions")
	c := newMember(t, cfg, log, "c")
	start = time.Now()
	t.Logf("3 members: %s (after %s)", spread([]*Consumer{a, b, c}), time.Since(start))
	publish(6)
	assert.NotEmpty(t, log.parts("c"), "the new member processes partitions")

	require.NoError(t, b.Stop(ctx))
	start = time.Now()
	t.Logf("b stopped: %s (after %s)", spread([]*Consumer{a, c}), time.Since(start))
	publish(9)
	c.kill()
	start = time.Now()
	t.Logf("c killed: %s (after %s)", spread([]*Consumer{a}), time.Since(start))
	publish(12)
	ps, _ := a.assigned()
	assert.Equal(t, seq(cfg.Partitions), ps, "a holds every partition again")
	log.check(t, batch(32, 15, 0), true)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestStaticMemberGetsPartitionsBack kills member 0 of 2 static members: member 1 takes its
// partitions over, and gives them back when member 0 returns.
func TestStaticMemberGetsPartitionsBack(t *testing.T) {
	n := natstest.StartJetStream(t)
	cfg := testConfig(n.URL())
	cfg.Members = 2
	cfg.MaxInFlight = 1
	p := newProducer(t, cfg)
	log := newAckLog()
	ctx := testCtx(t, 60*time.Second)
	cfgB := cfg
	cfgB.Member = 1
	a := newMember(t, cfg, log, "a")
	b := newMember(t, cfgB, log, "b")
	assert.Equal(t, [][]int{{0, 2}, {1, 3}}, waitSpread(t, []*Consumer{a, b}, cfg.Partitions))
	a.kill()
	start := time.Now()
	assert.Equal(t, [][]int{{0, 1, 2, 3}}, waitSpread(t, []*Consumer{b}, cfg.Partitions))
	t.Logf("member 1 assigned member 0's partitions %s after the kill", time.Since(start))
	msgs := batch(20, 2, 0)
	require.NoError(t, p.Publish(ctx, msgs))
	require.Eventually(t, func() bool { return log.drained(ctx, t, cfg, len(msgs)) }, 30*time.Second, 50*time.Millisecond)

	a2 := newMember(t, cfg, log, "a2")
	assert.Equal(t, [][]int{{0, 2}, {1, 3}}, waitSpread(t, []*Consumer{a2, b}, cfg.Partitions), "member 0 gets its partitions back")
	more := batch(20, 2, 2)
	require.NoError(t, p.Publish(ctx, more))
	require.Eventually(t, func() bool { return log.drained(ctx, t, cfg, len(msgs)+len(more)) }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, []int{0, 2}, log.parts("a2"), "the returning member processes its own partitions")
	log.check(t, append(msgs, more...), true)
}

// jetStreamOf connects to cfg's servers for the test's own look at the streams.
func jetStreamOf(t *testing.T, cfg natsqueue.Config) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(strings.Join(cfg.URLs, ","))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}
