// Package leakcheck fails a test binary whose tests leave goroutines behind, as goleak does.
// The e2e module has no goleak: its go.mod is an input of the control plane's cache stamp (see
// package bins), so a new requirement there would rebuild Kubernetes on every machine.
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
package leakcheck

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Timeout is how long Main waits for goroutines to end after the tests.
const Timeout = 5 * time.Second

// Main runs the tests and, when they passed, fails if goroutines started by them are still
// running after Timeout. It does not return.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Check(Timeout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check waits up to timeout until no goroutine is running but the caller's and those of the
// runtime and the testing package, and returns an error with the stacks of those left. It
// closes the idle connections of http.DefaultTransport first.
func Check(timeout time.Duration) error {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
	deadline := time.Now().Add(timeout)
	for {
		left := Others()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leakcheck: %d goroutines still running after %s:\n\n%s", len(left), timeout, strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ignored are frames of goroutines that belong to the runtime or the test binary itself.
var ignored = []string{
	"testing.(*M).",
	"testing.runTests",
	"testing.(*T).Run(",
	"testing.(*F).",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.ReadTrace",
}

// Others returns the stacks of the goroutines other than the caller's, the runtime's and the
// testing package's.
func Others() []string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		if i == 0 {
			continue // runtime.Stack lists the caller first
		}
		skip := false
		for _, frame := range ignored {
			if strings.Contains(g, frame) {
				skip = true
				break
			}
		}
		if !skip {
			out = append(out, g)
		}
	}
	return out
}
