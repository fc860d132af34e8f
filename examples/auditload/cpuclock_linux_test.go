package main

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProcessCPUOfAnotherProcess: the CPU clock of a child process that spins grows while it
// spins and agrees with what /proc/PID/stat says it used, to within the hundredths of a second
// /proc counts in; a process that does not exist is an error, not zero.
func TestProcessCPUOfAnotherProcess(t *testing.T) {
	if os.Getenv("AUDITLOAD_SPIN") != "" {
		// The child: busy for up to a minute (the parent kills it well before).
		for start := time.Now(); time.Since(start) < time.Minute; {
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestProcessCPUOfAnotherProcess$")
	cmd.Env = append(os.Environ(), "AUDITLOAD_SPIN=1")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	first, err := processCPU(pid)
	require.NoError(t, err)
	// The clock of the spinning child grows (polled: a loaded machine may run the child late).
	require.Eventually(t, func() bool {
		cpu, err := processCPU(pid)
		return err == nil && cpu > first+50*time.Millisecond
	}, 30*time.Second, 10*time.Millisecond, "the clock of a spinning process grows")
	lo, err := processCPU(pid)
	require.NoError(t, err)
	ticks, err := statCPU(pid)
	require.NoError(t, err)
	hi, err := processCPU(pid)
	require.NoError(t, err)
	// /proc rounds user and system time down to whole hundredths each.
	assert.GreaterOrEqual(t, ticks, lo-20*time.Millisecond)
	assert.LessOrEqual(t, ticks, hi)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	_, err = processCPU(pid)
	assert.Error(t, err, "a process that has ended has no CPU clock")
}
