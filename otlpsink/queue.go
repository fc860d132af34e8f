package otlpsink

import (
	"sync"

	"github.com/kelemetry/kelemetry/aggregator"
)

// spanQueue is the sink's FIFO of spans, bounded by count and by estimated bytes. The one worker
// reads batches from its head with peek and removes them with remove only once they are sent
// (or given up), so a batch being retried still takes its room: the bounds cover everything the
// sink holds. Spans are admitted all or none per push, so a refused Export is retried whole.
type spanQueue struct {
	mu       sync.Mutex
	items    []queued
	head     int
	bytes    int64
	maxSpans int
	maxBytes int64
	// ready gets a token when a push makes the queue non-empty or brings it to wakeAt spans (a
	// full batch): the worker, which looks at the size before it waits, needs no other wake-up.
	ready  chan struct{}
	wakeAt int
	// room is closed (and replaced) when spans are removed, waking waiting pushes and Syncs.
	room chan struct{}
	// pushed and removed count the spans ever pushed and removed: a span's position is the
	// value of pushed before it was appended, and it has left the queue once removed is past it.
	pushed, removed uint64
	// flushTo asks the worker to send, without waiting for a full batch or the flush interval,
	// until removed reaches it (Sync).
	flushTo uint64
}

type queued struct {
	span  *aggregator.Span
	bytes int64
}

func newSpanQueue(maxSpans int, maxBytes int64, batch int) *spanQueue {
	return &spanQueue{maxSpans: maxSpans, maxBytes: maxBytes, wakeAt: batch, ready: make(chan struct{}, 1), room: make(chan struct{})}
}

// push appends spans when they all fit and reports true; otherwise it appends nothing and
// returns false and a channel closed when room is made. A push larger than the whole bound is
// admitted into an empty queue, so that it cannot wait forever.
func (q *spanQueue) push(spans []*aggregator.Span) (bool, <-chan struct{}) {
	var buf [8]int64
	sizes := buf[:0]
	var total int64
	for _, sp := range spans {
		n := spanBytes(sp)
		sizes = append(sizes, n)
		total += n
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.items) - q.head
	if n > 0 && (n+len(spans) > q.maxSpans || q.bytes+total > q.maxBytes) {
		return false, q.room
	}
	for i, sp := range spans {
		q.items = append(q.items, queued{span: sp, bytes: sizes[i]})
	}
	q.bytes += total
	q.pushed += uint64(len(spans))
	if n == 0 || (n < q.wakeAt && n+len(spans) >= q.wakeAt) {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return true, nil
}

// peek appends up to maxSpans spans of at most maxBytes together (one at least) from the head to
// dst, without removing them.
func (q *spanQueue) peek(dst []*aggregator.Span, maxSpans int, maxBytes int64) []*aggregator.Span {
	q.mu.Lock()
	defer q.mu.Unlock()
	var bytes int64
	for i := q.head; i < len(q.items) && len(dst) < maxSpans; i++ {
		if bytes += q.items[i].bytes; bytes > maxBytes && len(dst) > 0 {
			break
		}
		dst = append(dst, q.items[i].span)
	}
	return dst
}

// remove removes n spans from the head and wakes waiting pushes.
func (q *spanQueue) remove(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.items)-q.head)
	for i := q.head; i < q.head+n; i++ {
		q.bytes -= q.items[i].bytes
		q.items[i] = queued{}
	}
	q.head += n
	q.removed += uint64(n)
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > len(q.items)/2 && q.head > 1024 {
		m := copy(q.items, q.items[q.head:])
		clear(q.items[m:])
		q.items, q.head = q.items[:m], 0
	}
	if n > 0 {
		close(q.room)
		q.room = make(chan struct{})
	}
}

// flushAll asks the worker to send everything pushed so far at once, wakes it, and returns the
// position up to which it asked: the spans pushed so far have all left the queue once removed
// reaches it.
func (q *spanQueue) flushAll() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushTo = max(q.flushTo, q.pushed)
	if q.removed < q.flushTo {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return q.pushed
}

// flushing reports whether spans asked for by flushAll are still queued.
func (q *spanQueue) flushing() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.removed < q.flushTo
}

// removedUpTo returns whether the spans before position to have all been removed and, when not,
// a channel closed at the next removal.
func (q *spanQueue) removedUpTo(to uint64) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.removed >= to {
		return true, nil
	}
	return false, q.room
}

// headPos returns the position of the first span queued.
func (q *spanQueue) headPos() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.removed
}

// size returns the number of spans held and their estimated bytes.
func (q *spanQueue) size() (int, int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head, q.bytes
}

// sdkOverhead is the estimated size of a queued span beyond aggregator.Span.ApproxBytes: the
// converted SDK span and its protobuf encoding.
const sdkOverhead = 256

// spanBytes estimates the memory a queued span holds until it is sent.
func spanBytes(sp *aggregator.Span) int64 {
	return sp.ApproxBytes() + sdkOverhead
}
