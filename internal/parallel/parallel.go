// Package parallel runs independent parts of one piece of work at once, on the cores there are.
package parallel

import (
	"runtime"
	"sync"
)

// Parts calls fn on contiguous parts [lo, hi) of [0, n) that together cover it, numbered 0, 1,
// ... in their order, and returns how many there were. The parts run at once, up to GOMAXPROCS
// and maxParts (0: no other bound) of them, each at least minPart long; when that makes one part,
// fn runs once on [0, n) in the caller. Part 0 always runs in the caller.
func Parts(n, minPart, maxParts int, fn func(part, lo, hi int)) int {
	parts := min(runtime.GOMAXPROCS(0), n/max(minPart, 1))
	if maxParts > 0 {
		parts = min(parts, maxParts)
	}
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
