package query

import (
	"runtime"
	"sync"
)

// inParallel calls fn on contiguous parts [lo, hi) of [0, n) that together cover it, at once
// on up to GOMAXPROCS goroutines when n is at least 2*minPart (the work of a small tree is not
// worth a goroutine), else once on [0, n) in the caller. The parts of a large tree's drawing
// (folding each object's events, encoding each span) are independent, and a query runs them
// while the request waits.
func inParallel(n, minPart int, fn func(lo, hi int)) {
	inParts(n, minPart, func(_, lo, hi int) { fn(lo, hi) })
}

// inParts is inParallel with the number of each part (0, 1, ... in the order of the parts); it
// returns how many parts there were.
func inParts(n, minPart int, fn func(part, lo, hi int)) int {
	parts := min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	if parts <= 1 {
		fn(0, 0, n)
		return 1
	}
	var wg sync.WaitGroup
	for k := 1; k < parts; k++ {
		wg.Go(func() { fn(k, k*n/parts, (k+1)*n/parts) })
	}
	fn(0, 0, n/parts)
	wg.Wait()
	return parts
}
