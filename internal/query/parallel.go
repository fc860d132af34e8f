package query

import "github.com/kelemetry/kelemetry/internal/parallel"

// inParallel calls fn on contiguous parts [lo, hi) of [0, n), at once on the cores there are when
// n is at least 2*minPart (the work of a small tree is not worth a goroutine; parallel.Parts).
// The parts of a large tree's drawing (filling and folding each object, encoding each span) are
// independent, and a query runs them while the request waits.
func inParallel(n, minPart int, fn func(lo, hi int)) {
	parallel.Parts(n, minPart, 0, func(_, lo, hi int) { fn(lo, hi) })
}
