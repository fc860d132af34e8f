package objdiff

import (
	"container/list"
	"sync"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Reasons of evictions from the audit-stream diff cache, the reason attribute of
// kelemetry.diff.stream.evictions.
const (
	evictObjects = "objects" // over StreamConfig.CacheSize
	evictBytes   = "bytes"   // over StreamConfig.MaxBytes
)

// versionOverhead approximates the bytes a kept version takes besides its body, index and
// strings: the list element, the map entry, the version and entry structs.
const versionOverhead = 256

// versionCache is an LRU of the last version of each object, bounded by count and by estimated
// bytes. Safe for concurrent use.
type versionCache struct {
	maxEntries int
	maxBytes   int64
	// onEvict counts evictions by reason; it is called outside the lock.
	onEvict func(reason string, n int64)

	mu    sync.Mutex
	ll    *list.List // of *cacheItem, most recently used first
	items map[aggregator.ObjectKey]*list.Element
	bytes int64
}

type cacheItem struct {
	key  aggregator.ObjectKey
	v    *version
	size int64
}

func newVersionCache(maxEntries int, maxBytes int64, onEvict func(reason string, n int64)) *versionCache {
	return &versionCache{maxEntries: maxEntries, maxBytes: maxBytes, onEvict: onEvict,
		ll: list.New(), items: map[aggregator.ObjectKey]*list.Element{}}
}

// versionSize estimates the heap a kept version takes: its body (the stripped object's encoded
// size, by capacity), its structural index, its strings and a fixed overhead.
func versionSize(key aggregator.ObjectKey, v *version) int64 {
	n := int64(cap(v.body)) + int64(len(v.rv)) + versionOverhead
	n += int64(len(key.Cluster) + len(key.Group) + len(key.Resource) + len(key.Namespace) + len(key.Name))
	if v.idx != nil {
		n += int64(v.idx.Bytes())
	}
	return n
}

// Get returns key's version and marks it used.
func (c *versionCache) Get(key aggregator.ObjectKey) (*version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheItem).v, true
	}
	return nil, false
}

// Peek returns key's version without marking it used.
func (c *versionCache) Peek(key aggregator.ObjectKey) (*version, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		return e.Value.(*cacheItem).v, true
	}
	return nil, false
}

// Add stores v as key's version (replacing the previous one) and evicts the least recently used
// versions beyond the bounds; a version larger than the whole byte budget is not kept.
func (c *versionCache) Add(key aggregator.ObjectKey, v *version) {
	size := versionSize(key, v)
	var byObjects, byBytes int64
	c.mu.Lock()
	if e, ok := c.items[key]; ok {
		it := e.Value.(*cacheItem)
		c.bytes += size - it.size
		it.v, it.size = v, size
		c.ll.MoveToFront(e)
	} else {
		c.items[key] = c.ll.PushFront(&cacheItem{key: key, v: v, size: size})
		c.bytes += size
	}
	for c.ll.Len() > c.maxEntries {
		c.removeElement(c.ll.Back())
		byObjects++
	}
	for c.bytes > c.maxBytes && c.ll.Len() > 0 {
		c.removeElement(c.ll.Back())
		byBytes++
	}
	c.mu.Unlock()
	if c.onEvict != nil {
		if byObjects > 0 {
			c.onEvict(evictObjects, byObjects)
		}
		if byBytes > 0 {
			c.onEvict(evictBytes, byBytes)
		}
	}
}

// Remove forgets key's version (not an eviction).
func (c *versionCache) Remove(key aggregator.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.removeElement(e)
	}
}

func (c *versionCache) removeElement(e *list.Element) {
	it := e.Value.(*cacheItem)
	c.ll.Remove(e)
	delete(c.items, it.key)
	c.bytes -= it.size
}

// Len is the number of versions kept.
func (c *versionCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Bytes is the estimated size of the versions kept.
func (c *versionCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
