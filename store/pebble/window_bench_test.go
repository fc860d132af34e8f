//go:build unix

package pebble

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/benchdata"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// BenchmarkGrowingWindow writes $KELEMETRY_BENCH_WINDOW_SPANS spans (default 400,000) into one
// window, as a steady ingest fills the current window: writes of 20,000 Pods in batches of 200,
// each with a diff and a 1 KB snapshot (benchdata.Writes). It reports the process's CPU time per
// span (the store's flushes and compactions included) over the first and the last fifth, and
// the bytes written per span at flushes and in compactions: what the cost of a write does as the
// window grows. Then it reads 2,000 of the window's traces back in one call (cold, then warm):
// what the compactions' rewrites buy. With KELEMETRY_BENCH_WINDOW_SPANS=3000000 (a window of a
// steady 1,700 spans/s): MaxBlobReferenceDepth 64 read them in 1.8-2.5 s, 1024 (values never
// copied) in 4.7-6.7 s, for 10-15% less CPU per span written.
func BenchmarkGrowingWindow(b *testing.B) {
	n := 400_000
	if v := os.Getenv("KELEMETRY_BENCH_WINDOW_SPANS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	ctx := context.Background()
	w := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		p := openTestPebble(b, Config{}, nil)
		clock := storeClock(p, w) // the store's clock follows the writes, as in a live ingest
		fifth := n / 5
		var marks []time.Duration
		written := 0
		marks = append(marks, processCPU())
		err := benchdata.Writes(benchdata.WritesConfig{Batch: 200, SnapshotBytes: 1024}, n, w, w.Add(29*time.Minute), func(spans []*aggregator.Span) error {
			clock.Store(spans[len(spans)-1].Start.UnixNano())
			if err := p.Export(ctx, spans); err != nil {
				return err
			}
			before := written / fifth
			written += len(spans)
			if written/fifth != before {
				marks = append(marks, processCPU())
			}
			return nil
		})
		require.NoError(b, err)
		require.NoError(b, p.Sync(ctx))
		// What the store wrote per span: at the flushes, and again in compactions (the write
		// amplification that grows with the window). Bytes, unlike CPU time, repeat from run to
		// run on a shared machine.
		t := p.db.Metrics().Total()
		tables, blobs, size := countFiles(b, p.cfg.Dir)
		open := openFiles(b)
		require.NoError(b, p.Stop(ctx))
		marks = append(marks, processCPU())
		openAfter := open - openFiles(b)
		// Reading the window back: 2,000 of its Pods' windows and traces (as a tree's query
		// does), from a store opened again (cold caches), then once more (warm).
		cfg := p.cfg
		require.NoError(b, p.close())
		p = openTestPebble(b, Config{Dir: cfg.Dir}, nil)
		keys := make([]aggregator.ObjectKey, 0, 2000)
		for o := range 2000 {
			obj := aggregator.ObjectRef{Cluster: "prod", Version: "v1", Resource: "pods", Namespace: "ns-" + strconv.Itoa(o%50), Name: "pod-" + strconv.Itoa(o)}
			keys = append(keys, obj.Key())
		}
		for _, name := range []string{"cold", "warm"} {
			c0, t0 := processCPU(), time.Now()
			// The windows as a query finds them (FindExact), then their traces.
			found, err := p.FindExact(ctx, keys, w, w)
			require.NoError(b, err)
			var ws []query.ObjectWindow
			for _, f := range found {
				ws = append(ws, f.Windows...)
			}
			require.Len(b, ws, len(keys))
			traces, err := p.GetTraces(ctx, ws)
			require.NoError(b, err)
			got := 0
			for _, t := range traces {
				got += len(t)
			}
			require.Greater(b, got, 2000)
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1e3, "read-"+name+"-ms")
			b.ReportMetric(float64((processCPU()-c0).Microseconds())/1e3, "read-"+name+"-cpu-ms")
		}
		b.ReportMetric(float64(tables), "tables")
		b.ReportMetric(float64(blobs), "blob-files")
		b.ReportMetric(float64(size)/float64(n), "disk-B/span")
		b.ReportMetric(float64(openAfter), "open-files")
		b.ReportMetric(float64(t.TableBytesFlushed+t.BlobBytesFlushed)/float64(n), "flushed-B/span")
		b.ReportMetric(float64(t.TableBytesCompacted+t.BlobBytesCompacted)/float64(n), "compacted-B/span")
		// The blob bytes grow when compactions copy values into new blob files (a table would
		// refer to more than MaxBlobReferenceDepth of them); the table bytes are keys rewritten.
		b.ReportMetric(float64(t.BlobBytesCompacted)/float64(n), "blob-compacted-B/span")
		b.ReportMetric(float64(t.TableBytesCompacted)/float64(n), "table-compacted-B/span")
		first := float64(marks[1]-marks[0]) / float64(fifth) / 1e3
		last := float64(marks[len(marks)-1]-marks[len(marks)-2]) / float64(fifth) / 1e3
		b.ReportMetric(first, "first-cpu-us/span")
		b.ReportMetric(last, "last-cpu-us/span")
		b.ReportMetric(float64(marks[len(marks)-1]-marks[0])/float64(n)/1e3, "cpu-us/span")
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countFiles returns the numbers of tables and blob files in the store folder dir, and the bytes
// of its files.
func countFiles(tb testing.TB, dir string) (tables, blobs int, size int64) {
	entries, err := os.ReadDir(dir)
	require.NoError(tb, err)
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".sst":
			tables++
		case ".blob":
			blobs++
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			size += info.Size()
		}
	}
	return tables, blobs, size
}

// openFiles returns the number of file descriptors the process has open.
func openFiles(tb testing.TB) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(tb, err)
	return len(entries)
}
