package jaeger

import (
	"container/list"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
)

// traceCache keeps the spans of traces read from a remote backend, bounded in (estimated)
// bytes, least recently used first out. An entry expires at its deadline: soon for a window
// that may still receive spans, later for one long closed.
type traceCache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	ll       *list.List // of *cacheEntry, most recently used first
	byID     map[trace.TraceID]*list.Element
	// evicted counts entries removed for room.
	evicted int64
}

type cacheEntry struct {
	id      trace.TraceID
	spans   []*aggregator.Span // nil: the backend has no such trace
	size    int64
	expires time.Time
}

func newTraceCache(maxBytes int64) *traceCache {
	return &traceCache{maxBytes: maxBytes, ll: list.New(), byID: map[trace.TraceID]*list.Element{}}
}

// get returns the cached spans of id; ok is false when absent or expired.
func (c *traceCache) get(id trace.TraceID, now time.Time) (spans []*aggregator.Span, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		return nil, false
	}
	e := el.Value.(*cacheEntry) // only *cacheEntry is stored
	if now.After(e.expires) {
		c.remove(el)
		return nil, false
	}
	c.ll.MoveToFront(el)
	return e.spans, true
}

// put stores the spans of id (nil: not found) until expires, evicting the least recently used
// entries beyond the byte bound. An entry larger than the bound is not kept.
func (c *traceCache) put(id trace.TraceID, spans []*aggregator.Span, expires time.Time) {
	size := int64(64)
	for _, sp := range spans {
		size += sp.ApproxBytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[id]; el != nil {
		c.remove(el)
	}
	if size > c.maxBytes {
		return
	}
	c.byID[id] = c.ll.PushFront(&cacheEntry{id: id, spans: spans, size: size, expires: expires})
	c.bytes += size
	for c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
		c.evicted++
	}
}

// drop forgets id (it was just written).
func (c *traceCache) drop(id trace.TraceID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[id]; el != nil {
		c.remove(el)
	}
}

func (c *traceCache) remove(el *list.Element) {
	e := c.ll.Remove(el).(*cacheEntry) // only *cacheEntry is stored
	delete(c.byID, e.id)
	c.bytes -= e.size
}

// stats returns the entries, bytes held and entries evicted for room.
func (c *traceCache) stats() (entries int, bytes, evicted int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.bytes, c.evicted
}
