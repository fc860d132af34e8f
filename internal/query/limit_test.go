package query

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = int64(1 << 20)

// acquireSoon admits a request on l in the background; the channel gets the ticket or the error.
func acquireSoon(ctx context.Context, l *limiter) chan any {
	ch := make(chan any, 1)
	go func() {
		t, err := l.acquire(ctx)
		if err != nil {
			ch <- err
			return
		}
		ch <- t
	}()
	return ch
}

// waiters is how many requests wait on l.
func (l *limiter) waiters() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// A request's room is what its reservation has left and, while others run, its share of the
// free budget: requests that size their next reads at once cannot each plan on all of it.
func TestTicketRoomSharesTheFreeBudget(t *testing.T) {
	ctx := context.Background()
	// 400 MiB for 4 requests: each is admitted with 100 MiB and keeps 10 MiB to draw its result.
	l := newLimiter(4, 50*time.Millisecond, 400*mib, 8*mib)
	t1, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, 90*mib+300*mib, t1.room(), "alone: its reservation less what it keeps, and all that is free")

	t2, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, 90*mib+100*mib, t1.room(), "two running: half of the 200 MiB free each")
	assert.Equal(t, t1.room(), t2.room())
	require.True(t, t2.chargeRead(150*mib))
	assert.Equal(t, 90*mib+(400-100-160)*mib/2, t1.room(), "t2 grew into the free budget")
	assert.Equal(t, (400-100-160)*mib/2, t2.room(), "t2's reservation is all used")

	t2.release()
	assert.Equal(t, 390*mib, t1.room(), "alone again")
	t1.release()
	assert.Equal(t, int64(-1), (*ticket)(nil).room(), "no admission: no bound")
}

func TestLimiterAdmitsByMemory(t *testing.T) {
	ctx := context.Background()
	// 400 MiB for 4 requests: each is admitted with 100 MiB, and keeps 10 MiB of it to draw its
	// result (1.25 × 8 MiB of render budget).
	l := newLimiter(4, 50*time.Millisecond, 400*mib, 8*mib)
	require.Equal(t, 100*mib, l.estimate)
	require.Equal(t, 10*mib, l.keep)

	t1, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.True(t, t1.chargeRead(250*mib), "alone, a request grows past its share into free memory")
	assert.Equal(t, 260*mib, l.reservedBytes(), "what it read and what it keeps to draw")

	t2, err := l.acquire(ctx)
	require.NoError(t, err, "100 MiB of the 400 are free")
	assert.Equal(t, 360*mib, l.reservedBytes())

	_, err = l.acquire(ctx)
	require.ErrorIs(t, err, ErrBusy, "two requests run, but 40 MiB are free: less than an estimate")
	require.ErrorIs(t, err, errMemoryBusy)
	assert.Equal(t, "too many queries are running: the query memory budget is in use (360 MiB held of 400 MiB)", err.Error())
	assert.Equal(t, "memory", BusyReason(err))

	assert.False(t, t1.chargeRead(100*mib), "no room for another 100 MiB: the reads stop")
	assert.True(t, t1.short)
	assert.Equal(t, 460*mib, l.reservedBytes(), "what was read is counted anyway (it is in memory), and what it keeps to draw it")
	assert.Equal(t, "result truncated: memory budget of 400 MiB reached (shared by the queries running at once); narrow the time range or try again later",
		t1.memoryMessage())
	t1.chargeRender(5 * mib)
	assert.Equal(t, 460*mib, l.reservedBytes(), "drawing uses what the reads kept")

	l.wait = 5 * time.Second
	next := acquireSoon(ctx, l)
	require.Eventually(t, func() bool { return l.waiters() == 1 }, 5*time.Second, time.Millisecond)
	t1.release()
	t1.release() // a second release gives nothing back twice
	got := <-next
	require.IsType(t, &ticket{}, got, "admitted once the memory was given back: %v", got)
	assert.Equal(t, 200*mib, l.reservedBytes())
	got.(*ticket).release()
	t2.release()
	assert.Zero(t, l.reservedBytes())
	l.mu.Lock()
	assert.Zero(t, l.running)
	l.mu.Unlock()
}

func TestLimiterCountsTurns(t *testing.T) {
	ctx := context.Background()
	l := newLimiter(2, 30*time.Millisecond, 0, 0)
	a, err := l.acquire(ctx)
	require.NoError(t, err)
	b, err := l.acquire(ctx)
	require.NoError(t, err)
	assert.True(t, a.chargeRead(1<<40), "without a memory budget, reads are never refused")
	_, err = l.acquire(ctx)
	require.ErrorIs(t, err, ErrBusy)
	assert.NotErrorIs(t, err, errMemoryBusy)
	assert.Equal(t, "concurrency", BusyReason(err))
	a.release()
	c, err := l.acquire(ctx)
	require.NoError(t, err)
	b.release()
	c.release()
}

// Waiters are admitted in the order they came, and at most 4×maxRunning wait.
func TestLimiterQueue(t *testing.T) {
	ctx := context.Background()
	l := newLimiter(1, 5*time.Second, 0, 0)
	first, err := l.acquire(ctx)
	require.NoError(t, err)
	var queued []chan any
	for i := range 4 {
		queued = append(queued, acquireSoon(ctx, l))
		require.Eventually(t, func() bool { return l.waiters() == i+1 }, 5*time.Second, time.Millisecond)
	}
	start := time.Now()
	_, err = l.acquire(ctx)
	require.ErrorIs(t, err, ErrBusy, "the queue is full")
	assert.Less(t, time.Since(start), time.Second, "refused at once")

	cur := first
	for i, ch := range queued {
		select {
		case got := <-ch:
			t.Fatalf("waiter %d admitted before its turn: %v", i, got)
		default:
		}
		cur.release()
		got := <-ch
		require.IsType(t, &ticket{}, got, "waiter %d", i)
		cur = got.(*ticket)
	}
	cur.release()
}

// A waiter whose context ends leaves the queue; the one behind it moves up.
func TestLimiterWaiterCanceled(t *testing.T) {
	l := newLimiter(1, 5*time.Second, 0, 0)
	held, err := l.acquire(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	gone := acquireSoon(ctx, l)
	require.Eventually(t, func() bool { return l.waiters() == 1 }, 5*time.Second, time.Millisecond)
	behind := acquireSoon(context.Background(), l)
	require.Eventually(t, func() bool { return l.waiters() == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	got := <-gone
	require.True(t, errors.Is(got.(error), context.Canceled), "%v", got)
	assert.Equal(t, 1, l.waiters())
	held.release()
	next := <-behind
	require.IsType(t, &ticket{}, next)
	next.(*ticket).release()
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Zero(t, l.running)
}

// The memory budget defaults to 40% of the Go memory limit when there is one.
func TestMemoryBudget(t *testing.T) {
	assert.Equal(t, int64(400<<20), Config{}.MemoryBudget(1000<<20))
	assert.Zero(t, Config{}.MemoryBudget(0), "no Go memory limit: no budget")
	assert.Zero(t, Config{}.MemoryBudget(1<<63-1), "math.MaxInt64 is no limit")
	assert.Equal(t, int64(300<<20), Config{MaxMemoryBytes: 300 << 20}.MemoryBudget(1000<<20))
	assert.Zero(t, Config{MaxMemoryBytes: -1}.MemoryBudget(1000<<20), "-1: off")
	assert.ErrorContains(t, Config{MaxMemoryBytes: -2}.Validate(), "maxMemoryBytes")
}
