//go:build !unix

package queue

import "io"

type noLock struct{}

func (noLock) Close() error { return nil }

// lockDir does nothing where flock is missing: one process per queue folder is up to the
// operator there.
func lockDir(string) (io.Closer, error) { return noLock{}, nil }
