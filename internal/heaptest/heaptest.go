// Package heaptest measures the Go heap for the tests that bound what a structure keeps alive.
package heaptest

import "runtime"

// Live runs a garbage collection and returns the bytes of heap objects left: what the program
// keeps reachable (and the little garbage of the collection itself).
func Live() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
