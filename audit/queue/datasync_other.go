//go:build !linux

package queue

import "os"

// syncData is f.Sync where fdatasync(2) is not available.
func syncData(f *os.File) error { return f.Sync() }
