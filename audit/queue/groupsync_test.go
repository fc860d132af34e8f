package queue

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGroupSyncShares(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	release := make(chan struct{})
	g := newGroupSync(func(context.Context) error {
		mu.Lock()
		calls++
		mu.Unlock()
		<-release
		return nil
	})
	var wg sync.WaitGroup
	call := func(entered chan<- struct{}) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered <- struct{}{}
			assert.NoError(t, g.do(context.Background()))
		}()
	}
	// The first caller's call runs (and blocks); the 7 callers that come meanwhile wait for the
	// next call, and share it.
	entered := make(chan struct{}, 8)
	call(entered)
	<-entered
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return calls == 1 }, 5*time.Second, time.Millisecond)
	for range 7 {
		call(entered)
	}
	for range 7 {
		<-entered
	}
	// From the send on entered to g.do's wait: all 7 wait for the running call to finish.
	require.Eventually(t, func() bool { return groupSyncWaiters() == 7 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, calls, "concurrent callers share calls")
}

// groupSyncWaiters counts this test's goroutines waiting in groupSync.do for a call to finish,
// from their stacks: groupSync tells nobody who waits.
func groupSyncWaiters() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sync.(*Cond).Wait") && strings.Contains(g, "(*groupSync).do") &&
			strings.Contains(g, "TestGroupSyncShares") {
			n++
		}
	}
	return n
}
