package query

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The garbage collector's headroom during heavy requests.
//
// With Go's default target (GOGC=100) the collector runs whenever the heap has doubled since
// the last collection. A heavy request starts from the small heap the process keeps between
// requests and builds hundreds of megabytes of spans and trees, so the heap doubles again and
// again while it runs: drawing the 10,000-pod Deployment tree took 4-5 collections, each marking
// everything the request held so far (a fifth of the request's CPU, and as much again in the
// write barriers and the allocations that assist marking).
//
// The limiter has already set the memory a heavy request may hold aside: its share of the memory
// budget (Config.MaxMemoryBytes), or, with no budget, noBudgetRoom. While heavy requests run, that
// memory is lent to the collector: the heap may grow by what they were admitted with before the
// next collection (the target becomes max(GOGC, room / live heap)), retuned as soon as each
// collection ends so that it stays the live heap plus the room, never a multiple of a heap the
// request grew. The Go memory limit (GOMEMLIMIT, set from the container's limit) still bounds
// the process whatever the target. When the last heavy request ends, the operator's target comes
// back, and the collector soon collects what the requests left. GOGC=off is left alone.

// noBudgetRoom is what a heavy request lends the collector when there is no memory budget (no
// Go memory limit and no Config.MaxMemoryBytes): about what drawing the 10,000-pod Deployment
// tree allocates (260-270 MB), measured on the curves' store.
const noBudgetRoom = 256 << 20

// gcLender lends room to the garbage collector. There is one per process (the target is the
// runtime's), shared by every limiter.
type gcLender struct {
	mu      sync.Mutex
	room    int64 // lent by the heavy requests running
	base    int   // the target to restore (GOGC), read when the first request lent
	percent int   // the target set now
	stop    chan struct{}

	// The runtime's, replaced in tests.
	setPercent func(int) int                         // debug.SetGCPercent
	gogc       func() int                            // the target now
	liveHeap   func() int64                          // the heap marked live by the last collection
	onGC       func(stop <-chan struct{}, fn func()) // afterEachGC
}

// gcRoom is the process's lender.
var gcRoom = newGCLender()

func newGCLender() *gcLender {
	return &gcLender{setPercent: debug.SetGCPercent, gogc: runtimeGOGC, liveHeap: runtimeLiveHeap, onGC: afterEachGC}
}

// lend adds n bytes of room while a request runs; repay(n) takes them back.
func (g *gcLender) lend(n int64) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.room == 0 {
		g.base = g.gogc()
		if g.base < 0 {
			return // GOGC=off: the operator's choice, the memory limit does the work
		}
		g.percent = g.base
		g.stop = make(chan struct{})
		g.onGC(g.stop, g.collected)
	}
	g.room += n
	g.retuneLocked()
}

// repay takes back n bytes lent; when nothing is lent any more, the target of before comes back.
func (g *gcLender) repay(n int64) {
	if n <= 0 {
		return
	}
	g.mu.Lock()
	if g.room == 0 { // lend did nothing (GOGC=off)
		g.mu.Unlock()
		return
	}
	g.room = max(g.room-n, 0)
	if g.room > 0 {
		g.retuneLocked()
		g.mu.Unlock()
		return
	}
	close(g.stop)
	g.stop = nil
	if g.percent != g.base {
		g.setPercent(g.base)
		g.percent = g.base
	}
	g.mu.Unlock()
}

// collected retunes the target after a collection, while something is lent.
func (g *gcLender) collected() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.room > 0 {
		g.retuneLocked()
	}
}

// retuneLocked sets the target for the heap to grow by the room lent above the live heap, and
// never below the operator's.
func (g *gcLender) retuneLocked() {
	live := max(g.liveHeap(), 1<<20)
	p := max(g.base, int(min(100*g.room/live, 1<<30)))
	if p != g.percent {
		g.setPercent(p)
		g.percent = p
	}
}

// lent is the room lent now.
func (g *gcLender) lent() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.room
}

// afterEachGC calls fn after each garbage collection from now on, until stop is closed: a
// sentinel object that nothing refers to gets a finalizer, which the collection that finds it
// unreachable queues as it ends; the finalizer calls fn and sets up the next sentinel. fn runs on
// the runtime's finalizer goroutine: it must be quick. Before (a ticker of 5 ms), the heap grew
// for up to 5 ms under the target of the live heap before the last collection: a request that
// started just after a large heap was collected got a target far too low, and building 192 MiB
// took 2-3 collections instead of at most one (TestGCRoomSparesCollections).
func afterEachGC(stop <-chan struct{}, fn func()) {
	runtime.SetFinalizer(&gcSentinel{stop: stop, fn: fn}, (*gcSentinel).collected)
}

// gcSentinel is afterEachGC's object; it holds pointers, so it is never in the tiny allocator's
// blocks, whose finalizers may wait for the block's other objects.
type gcSentinel struct {
	stop <-chan struct{}
	fn   func()
}

func (s *gcSentinel) collected() {
	select {
	case <-s.stop:
		return
	default:
	}
	s.fn()
	afterEachGC(s.stop, s.fn)
}

func runtimeGOGC() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	// GOGC=off (-1) reads as the largest uint64.
	v := s[0].Value.Uint64()
	if v > 1<<31 {
		return -1
	}
	return int(v)
}

func runtimeLiveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
