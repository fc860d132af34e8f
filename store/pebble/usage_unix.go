//go:build unix

package pebble

import (
	"io/fs"
	"syscall"
)

// allocated is the disk space of a file: its allocated blocks, as du counts them (a
// preallocated log takes its full size before it is written).
func allocated(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Blocks >= 0 {
		return uint64(st.Blocks) * 512
	}
	return uint64(max(info.Size(), 0))
}
