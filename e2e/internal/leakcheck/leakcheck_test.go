package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestCheckFindsALeftGoroutine(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		parkedForTheTest(stop)
	}()
	err := Check(100 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "parkedForTheTest") {
		t.Errorf("Check = %v, want the parked goroutine", err)
	}
	close(stop)
	<-done
	if err := Check(time.Second); err != nil {
		t.Errorf("after the goroutine ended: %v", err)
	}
}

func parkedForTheTest(stop <-chan struct{}) { <-stop }
