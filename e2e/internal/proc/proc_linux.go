package proc

import "syscall"

// sysProcAttr puts the child in its own process group and kills it if this process dies
// without stopping it (a test binary killed by a timeout, for example).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
