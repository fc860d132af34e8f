//go:build unix

package queue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockFileName is the lock file of a durable queue's folder.
const lockFileName = "LOCK"

// lockDir takes an exclusive, non-blocking lock (flock) on dir's lock file and writes this
// process's ID into it. It fails at once, naming the folder and the other process, when another
// process (or another queue of this one) holds the folder. The lock goes with the process: a
// crashed owner leaves no stale lock.
func lockDir(dir string) (io.Closer, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("audit queue dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil { // a file descriptor fits an int
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := "another process"
			if b, rerr := io.ReadAll(io.LimitReader(f, 32)); rerr == nil {
				if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil {
					owner = "process " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("audit queue folder %s is in use by %s: give each process its own audit.queue.dir", dir, owner)
		}
		return nil, fmt.Errorf("audit queue dir lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
