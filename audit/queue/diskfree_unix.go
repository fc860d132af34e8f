//go:build unix

package queue

import "syscall"

// freeBytes returns the bytes free to unprivileged writers on dir's filesystem; ok is false when
// it cannot tell.
func freeBytes(dir string) (free uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true // block size is positive; its type differs by platform
}
