package bodybuf

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// A webhook body is referred to by the events decoded from it until they are handled. Its buffer
// goes back to a pool by size class once nothing refers to it: when the request is answered, for
// a body no event was queued from (a batch posted again whole, one whose every item was queued
// before, a rejected one), or once the queue handled every event of it, for a queue that says
// when (ReleasingEnqueuer, Share). So a steady stream of batches, or a retry storm of large ones,
// does not allocate, fault in and collect a new buffer per request. sync.Pool lets go of what
// stays unused over two garbage collections, so the pool holds no memory for long.
const (
	minPooledBody = 16 << 10 // the smallest class; smaller bodies are plain allocations
	bodyClasses   = 10       // classes of 16 KiB, 32 KiB, ... 8 MiB
)

var bodyPools [bodyClasses]sync.Pool // of *[]byte with cap minPooledBody<<class

// bodyClass is the class of the smallest pooled buffer that holds size bytes, or -1 when size is
// outside the pooled range.
func bodyClass(size int64) int {
	if size <= minPooledBody/2 || size > minPooledBody<<(bodyClasses-1) {
		return -1
	}
	if size <= minPooledBody {
		return 0
	}
	return bits.Len64(uint64(size-1)) - bits.Len64(minPooledBody-1)
}

// bodyBuffer is a body buffer and, when it came from (or may go to) a pool, its whole capacity.
type Buffer struct {
	pooled *[]byte // nil: not poolable
}

// newBody returns an empty buffer of capacity size (no more, so that the byte budget holds) and
// the handle that can give it back.
func New(size int64) ([]byte, Buffer) {
	c := bodyClass(size)
	if c < 0 {
		return make([]byte, 0, size), Buffer{}
	}
	p, _ := bodyPools[c].Get().(*[]byte)
	if p == nil {
		b := make([]byte, 0, minPooledBody<<c)
		p = &b
	}
	return (*p)[:0:size], Buffer{pooled: p}
}

// recycle gives the buffer back to its pool. The caller must not use it, nor anything sliced from
// it, afterwards.
func (b *Buffer) Recycle() {
	if b.pooled == nil {
		return
	}
	p := b.pooled
	b.pooled = nil
	poison(*p)
	bodyPools[bodyClass(int64(cap(*p)))].Put(p)
}

// Share hands b to owners holders: it returns the function each of them calls once when done
// with the buffer, which goes back to its pool at the last call. b is left empty (Recycle does
// nothing). For a buffer that is not poolable the function does nothing.
func (b *Buffer) Share(owners int32) func() {
	p := b.pooled
	b.pooled = nil
	if p == nil {
		return func() {}
	}
	var left atomic.Int32
	left.Store(owners)
	return func() {
		if left.Add(-1) == 0 {
			poison(*p)
			bodyPools[bodyClass(int64(cap(*p)))].Put(p)
		}
	}
}

// Poisoned, set by tests only, makes a buffer filled with 0xff when it goes back
// to its pool, so that a reader that kept a slice of it reads garbage at once instead of, now
// and then, another request's body.
var Poisoned atomic.Bool

func poison(b []byte) {
	if Poisoned.Load() {
		b = b[:cap(b)]
		for i := range b {
			b[i] = 0xff
		}
	}
}

// ReleasingEnqueuer is a queue, or a wrapper of one, that says when it no longer refers to the
// memory of a batch's events, so that the body they were decoded from can serve another request.
// The audit queues in memory and on local disk are ones (and audit.Prefilter's wrapper of them);
// the NATS queue, and a wrapper that tells observers about batches, are not.
type ReleasingEnqueuer interface {
	// EnqueueReleasing is Enqueue that calls release at most once, and only after every event
	// of the batch was handled: nothing the queue or its handler keeps refers to the events'
	// memory then. It may never call it (events abandoned at Stop, a batch refused), and may call
	// it after returning an error (the durable queue's log failing once the events were queued):
	// the caller gives up its share of the memory to release and never takes it back.
	EnqueueReleasing(ctx context.Context, cluster string, events []*auditv1.Event, release func()) error
}
