// Package clockcache is a bounded map that evicts by the CLOCK algorithm (second chance): the
// entries sit in one slice and an index maps each key to its slot; a read sets the slot's
// reference bit, and a full cache evicts the first slot the clock hand finds without one,
// clearing the bits it passes. That is close to least-recently-used order at a fraction of the
// bookkeeping: no list node per entry and no allocation per Add once the slice has grown.
//
// It is made for keys and values that hold no pointers (fixed-size IDs, hashes, flags): then
// neither the slice nor the index holds a pointer, and the garbage collector marks the whole
// cache as two objects instead of scanning one list node per entry. The write path's caches of
// hundreds of thousands of entries were most of the objects of a steady ingest's live heap, which
// every collection scans.
//
// The index is the cache's own open-addressing table (linear probing, at most half full,
// deletion by shifting the entries after it back, so no deleted marker is ever left): a full
// cache's memory stays what it was when it filled, however many keys pass through it. A Go map
// index did not: the markers deleted keys leave made it grow by half again while the cache
// stayed full (100,000 entries: 6.2 MB full, 9.0 MB after a churn of a few times its size), which
// a steady ingest showed as a Go heap that kept rising for a quarter of an hour after its caches
// had filled.
package clockcache

import (
	"errors"
	"hash/maphash"
	"math/bits"
	"sync"
)

// Cache is a map of at most size entries, safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu sync.Mutex
	// table is the index: each cell is empty (0) or holds the upper 32 bits of its key's hash
	// (high half) and its slot's number plus one (low half). A key's home cell is its hash's upper
	// bits masked by len(table)-1; it sits there or in the first free cell after it.
	table   []uint64
	seed    maphash.Seed
	n       int // entries
	slots   []slot[K, V]
	free    []int32 // slots emptied by Remove, taken before any other
	hand    int
	size    int
	onEvict func(K, V)
}

type slot[K comparable, V any] struct {
	key K
	val V
	ref bool // read or written since the hand last passed it
}

// minTable is the index's first size; it doubles while the cache fills, to the power of two at
// least twice size.
const minTable = 16

// New returns an empty cache of at most size entries (size > 0). onEvict, if not nil, is called
// with each entry that Add evicts to make room, after the cache's lock is released; it is not
// called for Remove or Purge.
func New[K comparable, V any](size int, onEvict func(K, V)) (*Cache[K, V], error) {
	if size <= 0 || size > 1<<30 {
		return nil, errors.New("clockcache: size must be between 1 and 2^30")
	}
	return &Cache[K, V]{seed: maphash.MakeSeed(), size: size, onEvict: onEvict}, nil
}

// hash returns the upper 32 bits of key's hash, never 0 (0 marks an empty cell).
func (c *Cache[K, V]) hash(key K) uint64 {
	return maphash.Comparable(c.seed, key)>>32 | 1
}

// find returns the cell of key, or -1 and the free cell where it would go. Call with mu held
// and the table allocated.
func (c *Cache[K, V]) find(key K, h uint64) (cell int, free int) {
	mask := uint64(len(c.table) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		e := c.table[p]
		if e == 0 {
			return -1, int(p)
		}
		if e>>32 == h && c.slots[uint32(e)-1].key == key {
			return int(p), -1
		}
	}
}

// lookupSlot returns the slot number of key, or -1.
func (c *Cache[K, V]) lookupSlot(key K) int32 {
	if c.n == 0 {
		return -1
	}
	cell, _ := c.find(key, c.hash(key))
	if cell < 0 {
		return -1
	}
	return int32(uint32(c.table[cell])) - 1
}

// unlink empties cell and moves back the entries after it that could sit closer to their home
// cell, so no lookup ever needs to step over an emptied cell.
func (c *Cache[K, V]) unlink(cell int) {
	mask := len(c.table) - 1
	i := cell
	for j := (i + 1) & mask; c.table[j] != 0; j = (j + 1) & mask {
		home := int(c.table[j]>>32) & mask
		// The entry at j stays if its home lies cyclically in (i, j]: the probe from home to j
		// does not pass i.
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		c.table[i] = c.table[j]
		i = j
	}
	c.table[i] = 0
	c.n--
}

// insert adds the index entry of a key not in the cache, with hash h, for slot s; the table
// doubles first when it would be more than half full.
func (c *Cache[K, V]) insert(h uint64, s int32) {
	if 2*(c.n+1) > len(c.table) {
		c.resize(max(minTable, 2*len(c.table)))
	}
	_, free := c.find(c.slots[s].key, h)
	c.table[free] = h<<32 | uint64(s+1)
	c.n++
}

// resize moves the index into a table of n cells (a power of two).
func (c *Cache[K, V]) resize(n int) {
	old := c.table
	c.table = make([]uint64, n)
	mask := uint64(n - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		p := (e >> 32) & mask
		for c.table[p] != 0 {
			p = (p + 1) & mask
		}
		c.table[p] = e
	}
}

// tableCap is the largest the index grows to for a cache of size entries: the power of two at
// least twice size.
func tableCap(size int) int { return 1 << bits.Len(uint(2*size-1)) }

// Get returns the value of key and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) { return c.lookup(key, true) }

// Peek returns the value of key without marking it used.
func (c *Cache[K, V]) Peek(key K) (V, bool) { return c.lookup(key, false) }

func (c *Cache[K, V]) lookup(key K, mark bool) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.lookupSlot(key)
	if i < 0 {
		var zero V
		return zero, false
	}
	s := &c.slots[i]
	if mark {
		s.ref = true
	}
	return s.val, true
}

// Add sets the value of key and marks it used. When the cache is full and key is new, it evicts
// an entry first, and reports true.
func (c *Cache[K, V]) Add(key K, val V) (evicted bool) {
	c.mu.Lock()
	h := c.hash(key)
	if c.n > 0 {
		if cell, _ := c.find(key, h); cell >= 0 {
			s := &c.slots[uint32(c.table[cell])-1]
			s.val, s.ref = val, true
			c.mu.Unlock()
			return false
		}
	}
	var i int32
	var old slot[K, V]
	switch {
	case len(c.free) > 0:
		i = c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
	case len(c.slots) < c.size:
		c.slots = append(c.slots, slot[K, V]{})
		i = int32(len(c.slots) - 1)
	default:
		i = c.victim()
		old, evicted = c.slots[i], true
		cell, _ := c.find(old.key, c.hash(old.key))
		c.unlink(cell)
	}
	c.slots[i] = slot[K, V]{key: key, val: val, ref: true}
	c.insert(h, i)
	c.mu.Unlock()
	if evicted && c.onEvict != nil {
		c.onEvict(old.key, old.val)
	}
	return evicted
}

// victim moves the hand to the first slot without its reference bit, clearing the bits it
// passes, and returns that slot. Call with every slot used (no free slots), and mu held; it
// passes each slot at most twice.
func (c *Cache[K, V]) victim() int32 {
	for {
		i := c.hand
		if c.hand++; c.hand == len(c.slots) {
			c.hand = 0
		}
		if s := &c.slots[i]; s.ref {
			s.ref = false
			continue
		}
		return int32(i)
	}
}

// Remove deletes key and reports whether it was there.
func (c *Cache[K, V]) Remove(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return false
	}
	cell, _ := c.find(key, c.hash(key))
	if cell < 0 {
		return false
	}
	i := int32(uint32(c.table[cell])) - 1
	c.unlink(cell)
	c.slots[i] = slot[K, V]{}
	c.free = append(c.free, i)
	return true
}

// Purge deletes every entry and lets go of the cache's storage.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.table, c.n, c.slots, c.free, c.hand = nil, 0, nil, nil, 0
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
