//go:build !unix

package queue

// freeBytes cannot tell where statfs is missing: the write itself finds a full disk.
func freeBytes(string) (uint64, bool) { return 0, false }
