package webhook

import (
	"sync"

	"github.com/kelemetry/kelemetry/audit/internal/bodybuf"
)

// byteBudget bounds the bytes of webhook request bodies held at once, across requests. It never
// blocks: what does not fit is refused (the webhook answers 429 and the sender retries).
type byteBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	peak  int64 // the most ever used, for tests
	// onChange, if set, is told of every change of used (outside the lock), for a metric.
	onChange func(delta int64)
}

func newByteBudget(limit int64, onChange func(delta int64)) *byteBudget {
	return &byteBudget{limit: limit, onChange: onChange}
}

// tryAcquire takes n bytes if they fit.
func (b *byteBudget) tryAcquire(n int64) bool {
	b.mu.Lock()
	if n < 0 || b.used+n > b.limit {
		b.mu.Unlock()
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange(n)
	}
	return true
}

// release gives n bytes back.
func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	if b.onChange != nil {
		b.onChange(-n)
	}
}

// inUse returns the bytes held now.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reservation is what one request holds of a byteBudget. Not safe for concurrent use.
type reservation struct {
	b    *byteBudget
	held int64
	// body is the request body's buffer; reuse says that nothing refers to it any more, so that
	// release gives it back to its pool.
	body  bodybuf.Buffer
	reuse bool
	// shared, when set, gives back the request's share of a body shared with the queue
	// (bodybuf.Buffer.Share); body is empty then.
	shared func()
}

// grow takes n more bytes if they fit.
func (r *reservation) grow(n int64) bool {
	if !r.b.tryAcquire(n) {
		return false
	}
	r.held += n
	return true
}

// shrink gives n of the held bytes back.
func (r *reservation) shrink(n int64) {
	n = min(n, r.held)
	r.b.release(n)
	r.held -= n
}

// release gives every held byte back, and the body buffer when reuse was set; it may be called
// more than once.
func (r *reservation) release() {
	r.shrink(r.held)
	if r.reuse {
		r.body.Recycle()
	}
	if r.shared != nil {
		r.shared()
		r.shared = nil
	}
}
