//go:build !linux

package main

import (
	"errors"
	"time"
)

// processCPU is Linux-only; elsewhere the caller falls back to /proc (which it reads on Linux only
// too, so it reports no CPU time).
func processCPU(int) (time.Duration, error) {
	return 0, errors.New("the CPU clock of another process is read on Linux only")
}
