//go:build linux

package queue

import (
	"errors"
	"os"
	"syscall"
)

// syncData flushes f's data and the metadata needed to read it back (its size) with
// fdatasync(2), leaving out its times. An fsync of an appended file also writes its modification
// time, which on this kind of file system waits for a commit of the file system's journal, with
// whatever other files' metadata is pending: on a disk shared with the store's flushes and
// compactions, 40 KiB appends each followed by an fsync (a new file every MiB, as the log does)
// took over 10 ms 42 times in 8,245 and at most 826 ms, against once and at most 30 ms with
// fdatasync, interleaved in one run. (The all-in-one's own slow syncs under scripts/soak.sh
// stayed as many, about 0.16% over 50 ms: those wait for the store's writes in the disk's queue.)
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); !errors.Is(serr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
