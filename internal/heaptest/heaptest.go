// Package heaptest measures the Go heap for the tests that bound what a structure keeps alive.
package heaptest

import "runtime"

// Live returns the bytes of heap objects left after garbage collection: what the program keeps
// reachable. It collects three times: a sync.Pool's objects outlive one collection (in the
// pool's victim cache) and an object with a finalizer outlives the collection that queues its
// finalizer, so the heap after a single collection can still hold megabytes that are already
// unreachable, and two measurements would differ by what the pools happened to hold.
func Live() uint64 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
