package query

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRuntime stands for the collector's target and live heap.
type fakeRuntime struct {
	mu      sync.Mutex
	percent int
	live    int64
	sets    []int
	watches []gcWatch
}

// gcWatch is one call of the lender's onGC.
type gcWatch struct {
	stop <-chan struct{}
	fn   func()
}

func (f *fakeRuntime) lender() *gcLender {
	return &gcLender{
		setPercent: func(p int) int {
			f.mu.Lock()
			defer f.mu.Unlock()
			old := f.percent
			f.percent = p
			f.sets = append(f.sets, p)
			return old
		},
		gogc: func() int {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.percent
		},
		liveHeap: func() int64 {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.live
		},
		onGC: func(stop <-chan struct{}, fn func()) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.watches = append(f.watches, gcWatch{stop, fn})
		},
	}
}

func (f *fakeRuntime) gcPercent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.percent
}

// collected ends a collection that found live bytes live and calls the watchers not stopped.
func (f *fakeRuntime) collected(live int64) {
	f.mu.Lock()
	f.live = live
	var fns []func()
	for _, w := range f.watches {
		select {
		case <-w.stop:
		default:
			fns = append(fns, w.fn)
		}
	}
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func TestGCLenderTargets(t *testing.T) {
	f := &fakeRuntime{percent: 100, live: 50 * mib}
	g := f.lender()

	g.lend(256 * mib)
	assert.Equal(t, 512, f.gcPercent(), "the heap may grow by the room above the live heap: 50 MiB + 256 MiB")

	// A collection during the request found 200 MiB live: the target follows, so the next
	// collection comes 256 MiB later, not at 5 times 200 MiB.
	f.collected(200 * mib)
	assert.Equal(t, 128, f.gcPercent(), "retuned as the collection ended")

	g.lend(256 * mib) // a second request
	assert.Equal(t, 256, f.gcPercent())
	g.repay(256 * mib)
	assert.Equal(t, 128, f.gcPercent())
	g.repay(256 * mib)
	assert.Equal(t, 100, f.gcPercent(), "the operator's target is back when nothing is lent")
	assert.Zero(t, g.lent())

	// Once restored, collections do not change the target.
	n := len(f.sets)
	f.collected(10 * mib)
	assert.Len(t, f.sets, n, "no retuning while nothing is lent")
}

func TestGCLenderKeepsAHigherTarget(t *testing.T) {
	f := &fakeRuntime{percent: 400, live: 100 * mib}
	g := f.lender()
	g.lend(64 * mib) // 64% of the live heap: less than the operator's 400%
	assert.Equal(t, 400, f.gcPercent())
	g.repay(64 * mib)
	assert.Equal(t, 400, f.gcPercent())
	assert.Empty(t, f.sets, "the target was never changed")
}

func TestGCLenderLeavesGOGCOff(t *testing.T) {
	f := &fakeRuntime{percent: -1, live: 100 * mib}
	g := f.lender()
	g.lend(256 * mib)
	g.repay(256 * mib)
	assert.Empty(t, f.sets, "GOGC=off is left alone")
	assert.Equal(t, -1, f.gcPercent())
}

func TestLimiterLendsItsReservations(t *testing.T) {
	ctx := context.Background()
	f := &fakeRuntime{percent: 100, live: 100 * mib}
	g := f.lender()

	// With a budget: each request lends its admission estimate (400 MiB / 4).
	l := newLimiter(4, 50*time.Millisecond, 400*mib, 8*mib)
	l.gc = g
	a, err := l.acquire(ctx)
	require.NoError(t, err)
	b, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, 200*mib, g.lent())
	assert.Equal(t, 200, f.gcPercent())
	// Growing past the estimate takes more budget, not more headroom: the room lent stays
	// what the request was admitted with.
	require.True(t, a.chargeRead(150*mib))
	assert.Equal(t, 200*mib, g.lent())
	a.release()
	a.release() // a second release repays nothing
	assert.Equal(t, 100*mib, g.lent())
	b.release()
	assert.Zero(t, g.lent())
	assert.Equal(t, 100, f.gcPercent())

	// Without a budget: noBudgetRoom each.
	l = newLimiter(4, 50*time.Millisecond, 0, 8*mib)
	l.gc = g
	c, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(noBudgetRoom), g.lent())
	c.release()
	assert.Zero(t, g.lent())

	// A waiter that gives up repays nothing it did not lend.
	l = newLimiter(1, 20*time.Millisecond, 0, 8*mib)
	l.gc = g
	d, err := l.acquire(ctx)
	require.NoError(t, err)
	_, err = l.acquire(ctx)
	require.ErrorIs(t, err, ErrBusy)
	assert.Equal(t, int64(noBudgetRoom), g.lent())
	d.release()
	assert.Zero(t, g.lent())
}

// TestGCRoomSparesCollections runs the real collector: a request that builds 192 MiB of data
// from a small heap takes several collections under GOGC=100 (the heap doubles from a few MiB),
// and at most one with 256 MiB lent; the target is restored after.
func TestGCRoomSparesCollections(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	build := func() uint64 {
		runtime.GC()
		before := gcCycles()
		var held [][]byte
		for range 192 {
			b := make([]byte, 1<<20)
			b[0] = 1
			held = append(held, b)
		}
		n := gcCycles() - before
		runtime.KeepAlive(held)
		return n
	}
	plain := build()

	g := newGCLender()
	g.lend(256 * mib)
	lent := build()
	g.repay(256 * mib)

	t.Logf("collections while 192 MiB were built: %d under GOGC=100, %d with 256 MiB lent", plain, lent)
	assert.GreaterOrEqual(t, plain, uint64(3))
	assert.LessOrEqual(t, lent, uint64(1))
	assert.Equal(t, 100, runtimeGOGC(), "the target is restored")
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// afterEachGC calls its function as each real collection ends, and no more once stopped.
func TestAfterEachGC(t *testing.T) {
	stop := make(chan struct{})
	var calls atomic.Int64
	afterEachGC(stop, func() { calls.Add(1) })
	for range 3 {
		before := calls.Load()
		runtime.GC()
		require.Eventually(t, func() bool { return calls.Load() > before }, 5*time.Second, time.Millisecond, "called after the collection")
	}
	close(stop)
	stopped := calls.Load()
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond) // the finalizer goroutine's turn
	assert.Equal(t, stopped, calls.Load(), "not called once stopped")
}
