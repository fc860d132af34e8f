//go:build !unix

package docgen

import "os/exec"

// setProcessGroup leaves cmd as it is: cancellation kills the shell only.
func setProcessGroup(*exec.Cmd) {}
