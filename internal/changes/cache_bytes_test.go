package changes

import (
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kelemetry/kelemetry/internal/telemetrytest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestCacheBoundedByBytesWithLargeObjects keeps the change cache within MaxBytes when every
// record is a large snapshot, and counts the evictions by reason.
func TestCacheBoundedByBytesWithLargeObjects(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	const maxBytes = 4 << 20
	cache, err := NewCache(changescfg.CacheConfig{MaxBytes: maxBytes},
		telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	for i := range 100 { // 300 KB each: 30 MB through a 4 MiB budget
		cache.Put(Record{Key: podKey("big-"+strconv.Itoa(i), "1"), Kind: KindCreation, Snapshot: make([]byte, 300<<10)})
		assert.LessOrEqual(t, cache.Bytes(), int64(maxBytes))
	}
	assert.LessOrEqual(t, cache.Len(), maxBytes/(300<<10))
	// The newest records are kept, the oldest evicted.
	_, ok := cache.Get(podKey("big-99", "1"))
	assert.True(t, ok)
	_, ok = cache.Get(podKey("big-0", "1"))
	assert.False(t, ok)
	// A record larger than the whole budget is not kept.
	cache.Put(Record{Key: podKey("huge", "1"), Kind: KindCreation, Snapshot: make([]byte, maxBytes)})
	_, ok = cache.Get(podKey("huge", "1"))
	assert.False(t, ok)

	byReason := telemetrytest.Int64By(t, reader, "kelemetry.diff.informer.cache.evictions", "reason")
	assert.Equal(t, int64(100-cache.Len()+1), byReason["bytes"])
}

// The cache's evictions are exported at 0 from the start, each reason included.
func TestCacheEvictionsStartAtZero(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	_, err := NewCache(changescfg.CacheConfig{}, telemetry.Settings{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	assert.Equal(t, telemetrytest.Zeros("reason", "expired", "entries", "bytes", "replaced", "removed"),
		telemetrytest.Points(t, reader, "kelemetry.diff.informer.cache.evictions"))
}
