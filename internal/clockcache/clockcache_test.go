package clockcache

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/internal/heaptest"
)

func TestNewRejectsBadSize(t *testing.T) {
	_, err := New[int, int](0, nil)
	require.Error(t, err)
	_, err = New[int, int](-1, nil)
	require.Error(t, err)
}

// TestMatchesModel runs random operations against a map that follows the cache through its
// eviction callback: every read must find exactly what the model holds, with the value added
// last, and the cache never holds more than its size.
func TestMatchesModel(t *testing.T) {
	for _, size := range []int{1, 2, 7, 64} {
		model := map[uint16]uint64{}
		var c *Cache[uint16, uint64]
		c, err := New(size, func(k uint16, v uint64) {
			got, ok := model[k]
			require.True(t, ok, "evicted %d, which the model does not hold", k)
			require.Equal(t, got, v, "evicted %d with a stale value", k)
			delete(model, k)
			// Called outside the lock, with the new entry in place of the evicted one.
			require.Equal(t, len(model)+1, c.Len())
		})
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(uint64(size), 1))
		keys := uint16(3 * size)
		for step := range 20_000 {
			k := uint16(r.IntN(int(keys)))
			switch op := r.IntN(100); {
			case op < 45:
				v := r.Uint64()
				full := len(model) == size
				_, had := model[k]
				evicted := c.Add(k, v)
				assert.Equal(t, full && !had, evicted, "step %d: Add(%d) eviction", step, k)
				model[k] = v
			case op < 75:
				v, ok := c.Get(k)
				want, has := model[k]
				require.Equal(t, has, ok, "step %d: Get(%d)", step, k)
				require.Equal(t, want, v, "step %d: Get(%d) value", step, k)
			case op < 85:
				v, ok := c.Peek(k)
				want, has := model[k]
				require.Equal(t, has, ok, "step %d: Peek(%d)", step, k)
				require.Equal(t, want, v, "step %d: Peek(%d) value", step, k)
			case op < 99:
				_, has := model[k]
				require.Equal(t, has, c.Remove(k), "step %d: Remove(%d)", step, k)
				delete(model, k)
			default:
				c.Purge()
				clear(model)
			}
			require.Equal(t, len(model), c.Len(), "step %d", step)
			require.LessOrEqual(t, c.Len(), size)
		}
	}
}

// TestSecondChance: a full cache evicts an entry not read since the hand last passed it before
// one that was read; when every entry was read, the oldest goes.
func TestSecondChance(t *testing.T) {
	var evicted []string
	c, err := New(3, func(k string, _ int) { evicted = append(evicted, k) })
	require.NoError(t, err)
	c.Add("a", 1)
	c.Add("b", 2)
	c.Add("c", 3)
	c.Add("d", 4) // every entry marked: the hand clears them all and takes the first
	assert.Equal(t, []string{"a"}, evicted)
	_, ok := c.Get("b") // b read since the hand cleared it; c not
	require.True(t, ok)
	c.Add("e", 5)
	assert.Equal(t, []string{"a", "c"}, evicted)
	// b's second chance is spent (the hand cleared its mark on the way to c), and a peek does
	// not mark it again: the next eviction takes it before d and e, marked when added.
	_, ok = c.Peek("b")
	require.True(t, ok)
	c.Add("f", 6)
	assert.Equal(t, []string{"a", "c", "b"}, evicted)
	for k, want := range map[string]int{"d": 4, "e": 5, "f": 6} {
		v, ok := c.Peek(k)
		assert.True(t, ok, k)
		assert.Equal(t, want, v, k)
	}
}

// TestRemoveFreesSlot: a removed entry's slot is taken by the next new key, without evicting.
func TestRemoveFreesSlot(t *testing.T) {
	c, err := New[int, int](2, nil)
	require.NoError(t, err)
	c.Add(1, 1)
	c.Add(2, 2)
	require.True(t, c.Remove(1))
	require.False(t, c.Remove(1))
	assert.False(t, c.Add(3, 3), "a freed slot needs no eviction")
	assert.True(t, c.Add(4, 4))
	assert.Equal(t, 2, c.Len())
}

// TestAddDoesNotAllocate: once full, replacing entries allocates nothing (no node per entry).
func TestAddDoesNotAllocate(t *testing.T) {
	type key struct {
		id  [16]byte
		win int64
	}
	const size = 1024
	c, err := New[key, uint64](size, nil)
	require.NoError(t, err)
	n := int64(0)
	next := func() key { n++; return key{id: [16]byte{byte(n), byte(n >> 8), byte(n >> 16)}, win: n} }
	for range 4 * size {
		c.Add(next(), 1)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		k := next()
		c.Add(k, uint64(n))
		c.Get(k)
	})
	assert.Zero(t, allocs)
	assert.Equal(t, size, c.Len())
}

// churnKey is a key of the write path's shape: a 16-byte ID.
func churnKey(n uint64) (k [16]byte) {
	for i := range 8 {
		k[i] = byte(n >> (8 * i))
	}
	k[12] = byte(n * 7919)
	return k
}

// fillChurn adds the keys 1 to size, each with its number as value, and returns size.
func fillChurn(c *Cache[[16]byte, uint64], size int) uint64 {
	for n := uint64(1); n <= uint64(size); n++ {
		c.Add(churnKey(n), n)
	}
	return uint64(size)
}

// TestMemoryFlatUnderChurn: a full cache through which many times its size of keys pass (added,
// a third of them removed again) holds no more memory than when it filled: its index never grows
// past twice its size and keeps no marker of a deleted key.
func TestMemoryFlatUnderChurn(t *testing.T) {
	const size = 20_000
	base := heaptest.Live()
	c, err := New[[16]byte, uint64](size, nil)
	require.NoError(t, err)
	n := fillChurn(c, size)
	full := heaptest.Live() - base
	for range 20 * size {
		n++
		c.Add(churnKey(n), n)
		if n%3 == 0 {
			require.True(t, c.Remove(churnKey(n)))
		}
	}
	after := heaptest.Live() - base
	assert.Len(t, c.table, tableCap(size))
	assert.LessOrEqual(t, float64(after), 1.02*float64(full), "heap of the cache: %d bytes full, %d after the churn", full, after)
	// What is left is the last entries added, each with its value.
	for k := n - 100; k <= n; k++ {
		v, ok := c.Peek(churnKey(k))
		if k%3 == 0 {
			assert.False(t, ok, "removed key %d", k)
			continue
		}
		require.True(t, ok, "key %d", k)
		assert.Equal(t, k, v)
	}
	runtime.KeepAlive(c)
}

// BenchmarkChurn: Add of a new key to a full cache of 100,000 (an eviction) and Get of a key
// added shortly before, the write path's use.
func BenchmarkChurn(b *testing.B) {
	const size = 100_000
	c, err := New[[16]byte, uint64](size, nil)
	require.NoError(b, err)
	n := fillChurn(c, size)
	b.ResetTimer()
	for range b.N {
		n++
		c.Add(churnKey(n), n)
		c.Get(churnKey(n - 5000))
	}
}
