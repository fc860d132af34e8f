package pebble

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
)

// TestOpenFilesBounded: a store holding ten times more tables and blob files than maxOpenFiles,
// all of them read, keeps at most maxStoreFiles of its files open (Pebble's file cache closes the
// least recently used), and every window still reads back whole. Each window holds tables of its own
// (span keys start with the window, and tables end at its sixths), so a store's files grow with
// the windows it keeps; the process's open files grow with them only up to this bound.
func TestOpenFilesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and flushes 80 windows")
	}
	ctx := context.Background()
	dir, err := filepath.EvalSymlinks(t.TempDir()) // as /proc/self/fd names it
	require.NoError(t, err)
	p := openTestPebble(t, Config{Dir: dir, MaxAge: 100 * 365 * 24 * time.Hour}, nil)
	const windows, objects = 80, 20
	long := strings.Repeat("v", 400) // a value large enough for the blob files
	for w := range windows {
		win := t0.Add(time.Duration(w) * aggregator.DefaultWindow)
		var spans []*aggregator.Span
		for o := range objects {
			obj := ref("c1", "", "pods", "ns", "pod-"+strconv.Itoa(o))
			spans = append(spans, objectSpan(obj, win))
			for seg := range segments {
				ev := eventSpan(obj, win, strconv.Itoa(seg), time.Duration(seg)*aggregator.DefaultWindow/segments)
				ev.Attributes = append(ev.Attributes, aggregator.Attr{Key: "message", Value: long})
				spans = append(spans, ev)
			}
		}
		require.NoError(t, p.Export(ctx, spans))
		require.NoError(t, p.Sync(ctx))
		require.NoError(t, p.db.Flush())
	}
	tables, blobs, _ := countFiles(t, dir)
	require.Greater(t, tables+blobs, 5*maxStoreFiles, "the store must hold more files than it may keep open")

	peak := 0
	for w := range windows {
		win := t0.Add(time.Duration(w) * aggregator.DefaultWindow)
		for _, o := range []int{0, objects - 1} {
			obj := ref("c1", "", "pods", "ns", "pod-"+strconv.Itoa(o))
			spans, err := p.GetTrace(ctx, aggregator.TraceIDFor(obj.Key(), win))
			require.NoError(t, err, "window %d", w)
			require.Len(t, spans, 1+segments, "window %d", w)
			values := 0
			for _, sp := range spans {
				if v, ok := sp.Attributes.Get("message"); ok {
					require.Equal(t, long, v, "window %d: a value from a blob file", w)
					values++
				}
			}
			require.Equal(t, segments, values, "window %d", w)
		}
		// A running compaction holds its input and output files open besides the cache's, and
		// the cache closes the files it lets go in the background.
		waitQuiet(p)
		open := storeFiles(t, dir)
		for deadline := time.Now().Add(5 * time.Second); open > maxStoreFiles && time.Now().Before(deadline); open = storeFiles(t, dir) {
			time.Sleep(10 * time.Millisecond)
		}
		require.LessOrEqual(t, open, maxStoreFiles, "open files in the store folder after reading window %d", w)
		peak = max(peak, open)
	}
	t.Logf("%d tables and %d blob files; at most %d files of the folder open", tables, blobs, peak)
}

// maxStoreFiles bounds the files of the store folder open at once: Pebble's MaxOpenFiles is a
// soft bound (its file cache let 64 to 127 files be open at once in this test, besides the lock,
// the manifest, the write-ahead log and the folder itself).
const maxStoreFiles = 3 * maxOpenFiles

// waitQuiet returns once no flush or compaction of p runs.
func waitQuiet(p *Store) {
	for {
		m := p.db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// storeFiles returns the number of this process's open file descriptors on files in dir.
func storeFiles(t *testing.T, dir string) int {
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}
