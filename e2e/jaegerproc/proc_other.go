//go:build !linux

package jaegerproc

import "syscall"

// sysProcAttr puts Jaeger in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
