package objdiff

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// largeConfigMap is a ConfigMap of about size bytes, at resourceVersion rv.
func largeConfigMap(name, rv string, size int) []byte {
	var b strings.Builder
	b.WriteString(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"` + name + `","namespace":"default","resourceVersion":"` + rv + `"},"data":{`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":"` + strings.Repeat("v", 200) + `"`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func evictionsByReason(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return telemetrytest.Int64By(t, reader, "kelemetry.diff.stream.evictions", "reason")
}

func TestStreamCacheBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	const maxBytes = 2 << 20
	s, err := NewStream(diff.StreamConfig{CacheSize: 10_000, MaxBytes: maxBytes},
		telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	at := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	ref := func(i int) aggregator.ObjectRef {
		return aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "cm" + strconv.Itoa(i)}
	}
	const objects = 100 // of about 200 KB each: 20 MB, ten times the budget
	for i := range objects {
		body := largeConfigMap("cm"+strconv.Itoa(i), "1", 200<<10)
		s.Observe(ctx, Write{Object: ref(i), Verb: "create", Response: body, IsObject: true, ResourceVersion: "1", Time: at})
		assert.LessOrEqual(t, s.Bytes(), int64(maxBytes))
	}
	assert.Less(t, s.Len(), 11, "about 200 KB each in 2 MiB")
	assert.Positive(t, s.Len())
	assert.Greater(t, s.Bytes(), int64(maxBytes/2))

	// The most recent objects still diff; the oldest were evicted, least recently used first.
	last := largeConfigMap("cm"+strconv.Itoa(objects-1), "2", 200<<10)
	last = []byte(strings.Replace(string(last), `"k0":"v`, `"k0":"w`, 1))
	r := s.Observe(ctx, Write{Object: ref(objects - 1), Verb: "update", Response: last, IsObject: true, ResourceVersion: "2", Time: at})
	require.Len(t, r.Logs, 1)
	assert.Contains(t, r.Logs[0].Message, "data.k0")
	r = s.Observe(ctx, Write{Object: ref(0), Verb: "update", Response: largeConfigMap("cm0", "2", 1000), IsObject: true, ResourceVersion: "2", Time: at})
	assert.Contains(t, r.Logs[0].Message, "no previous version seen")

	ev := evictionsByReason(t, reader)
	assert.Greater(t, ev["bytes"], int64(objects-12))
	assert.Zero(t, ev["objects"])
}

func TestStreamCacheBoundedByObjects(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	s, err := NewStream(diff.StreamConfig{CacheSize: 3},
		telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	for i := range 5 {
		ref := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "cm" + strconv.Itoa(i)}
		s.Observe(ctx, Write{Object: ref, Verb: "create", Response: largeConfigMap(ref.Name, "1", 100), IsObject: true, ResourceVersion: "1"})
	}
	assert.Equal(t, 3, s.Len())
	assert.Equal(t, map[string]int64{"objects": 2}, evictionsByReason(t, reader))
	// Removing (a delete without the object) gives the bytes back.
	before := s.Bytes()
	s.Observe(ctx, Write{Object: aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "configmaps", Namespace: "default", Name: "cm4"}, Verb: "delete"})
	assert.Equal(t, 2, s.Len())
	assert.Less(t, s.Bytes(), before)
}

func TestStreamConfigMaxBytes(t *testing.T) {
	assert.Equal(t, int64(32<<20), diff.StreamConfig{}.WithDefaults().MaxBytes)
	require.Error(t, diff.StreamConfig{MaxBytes: -1}.Validate())
	require.Error(t, diff.StreamConfig{MaxBytes: 1000, MaxBodyBytes: 2000}.Validate(), "a kept object could never fit")
}

// TestStreamMemoryLargeObjects measures the heap the audit-stream diff keeps for many large
// objects, against its byte accounting: the heap must stay near MaxBytes, not grow with the
// object count.
func TestStreamMemoryLargeObjects(t *testing.T) {
	ctx := context.Background()
	const maxBytes = 16 << 20
	s, err := NewStream(diff.StreamConfig{MaxBytes: maxBytes}, telemetry.Settings{})
	require.NoError(t, err)
	const n, size = 400, 200 << 10 // 80 MB of objects through a 16 MiB budget
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		name := "cm" + strconv.Itoa(i)
		ref := aggregator.ObjectRef{Cluster: "c", Version: "v1", Resource: "configmaps", Namespace: "default", Name: name}
		s.Observe(ctx, Write{Object: ref, Verb: "create", Response: largeConfigMap(name, "1", size), IsObject: true, ResourceVersion: "1"})
		// An update too, so that the kept versions carry their structural index.
		s.Observe(ctx, Write{Object: ref, Verb: "update", Response: largeConfigMap(name, "2", size+300), IsObject: true, ResourceVersion: "2"})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d objects of %d bytes, MaxBytes %d: %d kept, accounting %d bytes, heap growth %d bytes",
		n, size, maxBytes, s.Len(), s.Bytes(), heap)
	assert.LessOrEqual(t, s.Bytes(), int64(maxBytes))
	assert.Less(t, heap, int64(2*maxBytes), "the accounting underestimates the heap kept")
	runtime.KeepAlive(s)
}

// The stream's counters are exported at 0 from the start, each result and reason included.
func TestStreamCountersStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	_, err := NewStream(diff.StreamConfig{}, telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros("reason", "objects", "bytes"), telemetrytest.Points(t, reader, "kelemetry.diff.stream.evictions"))
	assert.Equal(t, telemetrytest.Zeros("result", "diff", "noop", "unavailable", "request_patch", "snapshot", "skipped", "error", "warmed"),
		telemetrytest.Points(t, reader, "kelemetry.diff.stream.writes"))
}
