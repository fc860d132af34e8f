package query_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store"
	"github.com/kelemetry/kelemetry/store/pebble"
	"github.com/kelemetry/kelemetry/telemetry"
)

// heavyPebble is a Deployment with one ReplicaSet and pods Pods of three large events each (16
// KiB of attributes), in one window of an embedded store: its full tree is one heavy query of
// about 60 MiB of heap.
func heavyPebble(t *testing.T, pods int) store.Reader {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := pebble.Open(ctx, pebble.Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	var w world
	dep, rs := obj("deployments", "web"), obj("replicasets", "web-1")
	w.link(dep, rs, w0, "children")
	for p := range pods {
		pod := obj("pods", fmt.Sprintf("web-1-%04d", p))
		w.link(rs, pod, w0, "children")
		for e := range 3 {
			body := strings.Repeat(fmt.Sprintf("%04d-%d ", p, e), 16<<10/7)
			w.event(pod, w0.Add(time.Duration(e+1)*time.Minute), fmt.Sprintf("%d-%d", p, e), aggregator.Attr{Key: "kelemetry.diff", Value: body})
		}
		if len(w.spans) > 4096 {
			require.NoError(t, st.Export(ctx, w.spans))
			w.spans = nil
		}
	}
	require.NoError(t, st.Export(ctx, w.spans))
	// Opened again, without the buffers of the writes (Pebble keeps some tens of MiB of them).
	require.NoError(t, st.Stop(ctx))
	st, err = pebble.Open(ctx, pebble.Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Stop(context.Background()) })
	return st
}

// peakLiveHeap samples the heap the garbage collector found live at each cycle until stop is
// closed, and returns the highest.
func peakLiveHeap(stop <-chan struct{}) func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { <-done; return peak.Load() }
}

// Issue 35, finding 2, in one process: with a Go memory limit and the query memory budget it
// defaults to, rounds of four heavy queries at once keep the live heap under the limit; without
// the budget (query.maxMemoryBytes -1) the same rounds hold more than the limit, which no
// garbage collection can free.
func TestHeavyQueryRoundsStayUnderGoMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("heap figures under the race detector are not the product's")
	}
	if testing.Short() {
		t.Skip("five rounds of heavy queries")
	}
	const limit = 128 << 20
	st := heavyPebble(t, 1000)
	before := debug.SetMemoryLimit(limit)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	q := strings.Replace(fullTreeQuery, "start=0", "start="+strconv.FormatInt(w0.UnixMicro(), 10)+"&end="+strconv.FormatInt(w0.Add(time.Hour).UnixMicro(), 10), 1) + "&tags=resource%3Ddeployments"

	run := func(t *testing.T, cfg query.Config) (peak uint64, truncated []string) {
		srv := serveAll(t, st, cfg, telemetry.Settings{})
		runtime.GC()
		stop := make(chan struct{})
		result := peakLiveHeap(stop)
		for range 5 {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					resp, err := http.Get(srv.URL + q)
					if !assert.NoError(t, err) {
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, resp.StatusCode)
					mu.Lock()
					truncated = append(truncated, resp.Header.Get("X-Kelemetry-Truncated"))
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		close(stop)
		return result(), truncated
	}
	cfg := query.Config{PerLevel: 5000, Total: 5000, MaxRenderBytes: 1 << 20, QueueWait: 30 * time.Second}

	t.Run("budget", func(t *testing.T) {
		peak, truncated := run(t, cfg)
		t.Logf("peak live heap %d MiB with GOMEMLIMIT %d MiB and a query budget of %d MiB", peak>>20, limit>>20, cfg.MemoryBudget(limit)>>20)
		assert.Less(t, peak, uint64(limit), "peak live heap")
		assert.Contains(t, strings.Join(truncated, "\n"), "memory budget of "+strconv.FormatInt(cfg.MemoryBudget(limit)>>20, 10)+" MiB reached", "the budget was what held them")
	})
	t.Run("no budget", func(t *testing.T) {
		cfg.MaxMemoryBytes = -1
		peak, _ := run(t, cfg)
		t.Logf("peak live heap %d MiB with GOMEMLIMIT %d MiB and no query budget", peak>>20, limit>>20)
		assert.Greater(t, peak, uint64(limit), "without the budget the queries hold more than the limit: the test shows what it catches")
	})
}
