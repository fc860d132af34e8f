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
package clockcache

import (
	"errors"
	"sync"
)

// Cache is a map of at most size entries, safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	index   map[K]int32
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

// New returns an empty cache of at most size entries (size > 0). onEvict, if not nil, is called
// with each entry that Add evicts to make room, after the cache's lock is released; it is not
// called for Remove or Purge.
func New[K comparable, V any](size int, onEvict func(K, V)) (*Cache[K, V], error) {
	if size <= 0 || size > 1<<31-1 {
		return nil, errors.New("clockcache: size must be between 1 and 2^31-1")
	}
	return &Cache[K, V]{index: map[K]int32{}, size: size, onEvict: onEvict}, nil
}

// Get returns the value of key and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) { return c.lookup(key, true) }

// Peek returns the value of key without marking it used.
func (c *Cache[K, V]) Peek(key K) (V, bool) { return c.lookup(key, false) }

func (c *Cache[K, V]) lookup(key K, mark bool) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[key]
	if !ok {
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
	if i, ok := c.index[key]; ok {
		s := &c.slots[i]
		s.val, s.ref = val, true
		c.mu.Unlock()
		return false
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
		delete(c.index, old.key)
	}
	c.slots[i] = slot[K, V]{key: key, val: val, ref: true}
	c.index[key] = i
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
	i, ok := c.index[key]
	if !ok {
		return false
	}
	delete(c.index, key)
	c.slots[i] = slot[K, V]{}
	c.free = append(c.free, i)
	return true
}

// Purge deletes every entry and lets go of the cache's storage.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index, c.slots, c.free, c.hand = map[K]int32{}, nil, nil, 0
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}
