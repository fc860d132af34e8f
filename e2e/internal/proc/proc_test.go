package proc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sh starts /bin/sh -c script, its log in a fresh folder, and kills it at the end of the test.
func sh(t *testing.T, script string, env ...string) *Process {
	t.Helper()
	p, err := Start(nil, "sh", "/bin/sh", []string{"-c", script}, env, filepath.Join(t.TempDir(), "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// waitExit waits until the process has ended.
func waitExit(t *testing.T, p *Process) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for done, _ := p.Exited(); !done; done, _ = p.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog waits until the process log contains want.
func waitLog(t *testing.T, p *Process, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.LogTail(4096), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log %q does not contain %q", p.LogTail(4096), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStopSendsSIGTERM(t *testing.T) {
	p := sh(t, `trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	if done, _ := p.Exited(); done {
		t.Fatal("exited before Stop")
	}
	start := time.Now()
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Stop took %s: SIGTERM was not handled", d)
	}
	done, err := p.Exited()
	var exit *exec.ExitError
	if !done || !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Exited() = %v, %v; want true and exit status 3 of the TERM trap", done, err)
	}
	if !strings.Contains(p.LogTail(100), "got-term") {
		t.Errorf("log %q: the TERM trap did not run", p.LogTail(100))
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := sh(t, `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	start := time.Now()
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Stop returned after %s, before the grace period", d)
	}
	done, err := p.Exited()
	var exit *exec.ExitError
	if !done || !errors.As(err, &exit) {
		t.Fatalf("Exited() = %v, %v; want true and a signal", done, err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("exit %v, want killed by SIGKILL", err)
	}
}

// TestStopEndsProcessGroup checks that a child the process started (in the background, so
// that SIGTERM to the leader alone would leave it running) ends too.
func TestStopEndsProcessGroup(t *testing.T) {
	for name, stop := range map[string]func(*Process) error{
		"Stop": func(p *Process) error { return p.Stop(300 * time.Millisecond) },
		"Kill": (*Process).Kill,
	} {
		t.Run(name, func(t *testing.T) {
			p := sh(t, `trap '' TERM; sleep 60 & echo "child=$!"; wait`)
			waitLog(t, p, "child=")
			var child int
			for _, f := range strings.Fields(p.LogTail(4096)) {
				if v, ok := strings.CutPrefix(f, "child="); ok {
					child, _ = strconv.Atoi(v)
				}
			}
			if child <= 0 {
				t.Fatalf("no child pid in log %q", p.LogTail(4096))
			}
			if err := stop(p); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for syscall.Kill(child, 0) == nil {
				if time.Now().After(deadline) {
					_ = syscall.Kill(child, syscall.SIGKILL)
					t.Fatalf("child %d still runs after %s", child, name)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestKillAndStopAfterExit(t *testing.T) {
	p := sh(t, `exit 0`)
	waitExit(t, p)
	if _, err := p.Exited(); err != nil {
		t.Errorf("Exited error %v, want nil for status 0", err)
	}
	if err := p.Stop(time.Second); err != nil {
		t.Errorf("Stop after exit: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after exit: %v", err)
	}
}

func TestEnvAndAppendedLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	if err := os.WriteFile(log, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(nil, "echo", "/bin/sh", []string{"-c", `echo "v=$PROC_TEST_VAR"; echo err >&2`}, []string{"PROC_TEST_VAR=set"}, log)
	if err != nil {
		t.Fatal(err)
	}
	waitExit(t, p)
	if got, want := p.LogTail(1000), "before\nv=set\nerr"; got != want {
		t.Errorf("log %q, want %q (appended, with stdout, stderr and env)", got, want)
	}
	if p.Name() != "echo" || p.LogPath() != log || p.Pid() <= 0 {
		t.Errorf("Name %q LogPath %q Pid %d", p.Name(), p.LogPath(), p.Pid())
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(nil, "ghost", filepath.Join(dir, "missing"), nil, nil, filepath.Join(dir, "ghost.log"))
	if err == nil || !strings.Contains(err.Error(), "start ghost") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing binary: %v", err)
	}
	_, err = Start(nil, "ghost", "/bin/sh", nil, nil, filepath.Join(dir, "no", "such", "ghost.log"))
	if err == nil || !strings.Contains(err.Error(), "ghost log") {
		t.Errorf("unwritable log: %v", err)
	}
}

func TestFileTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("  one\ntwo\nthree \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int64]string{7: "three", 11: "two\nthree", 1000: "one\ntwo\nthree", 0: "", -5: ""} {
		if got := FileTail(path, n); got != want {
			t.Errorf("FileTail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := FileTail(path+".missing", 10); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := HostPort(port), "127.0.0.1:"+strconv.Itoa(port); got != want {
		t.Errorf("HostPort = %q, want %q", got, want)
	}
	l, err := net.Listen("tcp", HostPort(port))
	if err != nil {
		t.Fatalf("the free port is not free: %v", err)
	}
	l.Close()
}
