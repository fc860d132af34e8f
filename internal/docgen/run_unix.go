//go:build unix

package docgen

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in a process group of its own and makes its cancellation kill the
// whole group: a go run block's program, not only the shell.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
