// Package proc runs the child processes of the end-to-end tests (the control plane of package
// cluster, Kelemetry, Jaeger of package jaegerproc): each in its own process group, its output
// appended to a log file, stopped with SIGTERM then SIGKILL after a grace period. It also picks
// free local ports for their listeners.
package proc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killWait bounds the wait for the process to end after SIGKILL.
const killWait = 10 * time.Second

// Process is a child process started by Start in its own process group, so that stopping it
// also stops anything it started. Its methods are safe for concurrent use.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // valid once done is closed
	logger  *slog.Logger
}

// Start starts bin with args and, after the environment of this process, env; its standard
// output and error are appended to logPath. name names the process in errors and logs. A nil
// logger is slog.Default().
func Start(logger *slog.Logger, name, bin string, args, env []string, logPath string) (*Process, error) {
	if logger == nil {
		logger = slog.Default()
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{}), logger: logger}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	logger.Debug("started", "process", name, "pid", cmd.Process.Pid, "log", logPath)
	return p, nil
}

// Name is the name given to Start.
func (p *Process) Name() string { return p.name }

// Pid is the process id, also the id of its process group.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the log file given to Start.
func (p *Process) LogPath() string { return p.logPath }

// Exited reports whether the process has ended, with its error (nil when it exited with
// status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace (to the group: children the
// process left behind too), and waits for the process to end.
func (p *Process) Stop(grace time.Duration) error {
	if done, _ := p.Exited(); !done {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM) // Setpgid: the group id is the leader's pid
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			p.logger.Warn("did not stop in time, killing", "process", p.name, "grace", grace)
		}
	}
	return p.Kill()
}

// Kill sends SIGKILL to the process group (the leader, or children it left behind) and waits
// for the process to end.
func (p *Process) Kill() error {
	pgid := p.Pid()
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
}

// LogTail returns the last n bytes of the process log, for error messages.
func (p *Process) LogTail(n int64) string { return FileTail(p.logPath, n) }

// FileTail returns the last n bytes of the file at path, trimmed of surrounding white space,
// or "" when it cannot be read.
func FileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	if _, err := f.Seek(max(st.Size()-n, 0), io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return strings.TrimSpace(string(b))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// HostPort returns 127.0.0.1:port.
func HostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
