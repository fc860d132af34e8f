//go:build !unix

package pebble

import "io/fs"

// allocated is the disk space of a file; without block counts, its size.
func allocated(info fs.FileInfo) uint64 {
	return uint64(max(info.Size(), 0))
}
