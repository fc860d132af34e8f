package bodybuf

import (
	"math/bits"
	"sync"
)

// A webhook body is usually referred to by the events decoded from it until they are handled,
// so it cannot be reused. A body that no event refers to once the request is answered (a batch
// posted again whole, one whose every item was queued before, a rejected one) is: its buffer goes
// back to a pool by size class, so that a retry storm of large batches does not allocate, fault
// in and collect a new buffer per retry. sync.Pool lets go of what stays unused over two garbage
// collections, so the pool holds no memory for long.
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
	bodyPools[bodyClass(int64(cap(*p)))].Put(p)
}
