package changefeed

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/kelemetry/kelemetry/aggregator"
)

// Feed is a store's change feed: the queries its index answers (Find) and the live tail of what
// it stores (Follow), which the store feeds with Publish once its writes are committed. Stores
// that keep spans (the embedded, memory and Jaeger stores) return theirs from ChangeFeed.
type Feed struct {
	find func(ctx context.Context, q Query) (Page, error)

	mu      sync.Mutex
	subs    map[*Sub]struct{}
	maxSubs int
	bufLen  int
	cut     atomic.Int64
}

// Limits of the live tail.
const (
	// DefaultMaxFollowers bounds the live tails one process serves at once.
	DefaultMaxFollowers = 64
	// DefaultFollowBuffer is how many changes a live tail may lag behind the store before it is
	// cut off.
	DefaultFollowBuffer = 10_000
)

// ErrTooManyFollowers is returned by Follow when DefaultMaxFollowers tails are open.
var ErrTooManyFollowers = errors.New("too many live tails open")

// NewFeed returns the feed of a store whose index find answers.
func NewFeed(find func(ctx context.Context, q Query) (Page, error)) *Feed {
	return &Feed{find: find, subs: map[*Sub]struct{}{}, maxSubs: DefaultMaxFollowers, bufLen: DefaultFollowBuffer}
}

// WithLimits sets the live tail's limits (for tests) and returns f.
func (f *Feed) WithLimits(maxFollowers, buffer int) *Feed {
	f.maxSubs, f.bufLen = maxFollowers, buffer
	return f
}

// Find answers q (validated, with defaults): changes newest first.
func (f *Feed) Find(ctx context.Context, q Query) (Page, error) {
	if err := q.Validate(); err != nil {
		return Page{}, err
	}
	return f.find(ctx, q.WithDefaults())
}

// Sub is one live tail: C carries the changes it selects as they are stored, in the order they
// are; Done is closed when the tail ends: closed by its reader, or cut off because it fell
// DefaultFollowBuffer changes behind (CutOff then reports true). A tail never slows the store.
type Sub struct {
	C    <-chan Change
	Done <-chan struct{}

	q      Query
	c      chan Change
	done   chan struct{}
	once   sync.Once
	cutOff atomic.Bool
	feed   *Feed
}

// CutOff reports whether the tail was cut off for falling behind.
func (s *Sub) CutOff() bool { return s.cutOff.Load() }

// Close ends the tail.
func (s *Sub) Close() { s.end(false) }

func (s *Sub) end(cut bool) {
	s.once.Do(func() {
		if cut {
			s.cutOff.Store(true)
			s.feed.cut.Add(1)
		}
		s.feed.mu.Lock()
		delete(s.feed.subs, s)
		s.feed.mu.Unlock()
		close(s.done)
	})
}

// Follow opens a live tail of the changes q selects (its object, user, verb and outcome
// filters; not its range or limits). Close it when done.
func (f *Feed) Follow(q Query) (*Sub, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= f.maxSubs {
		return nil, ErrTooManyFollowers
	}
	s := &Sub{q: q, c: make(chan Change, f.bufLen), done: make(chan struct{}), feed: f}
	s.C, s.Done = s.c, s.done
	f.subs[s] = struct{}{}
	return s, nil
}

// Followers is the number of open live tails; CutOff counts the tails cut off so far.
func (f *Feed) Followers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// CutOff counts the live tails cut off for falling behind.
func (f *Feed) CutOff() int64 { return f.cut.Load() }

// Publish hands the writes among spans, just stored, to the live tails. It never blocks: a
// tail whose buffer is full is cut off.
func (f *Feed) Publish(spans []*aggregator.Span) {
	if f == nil {
		return
	}
	f.mu.Lock()
	if len(f.subs) == 0 {
		f.mu.Unlock()
		return
	}
	subs := make([]*Sub, 0, len(f.subs))
	for s := range f.subs {
		subs = append(subs, s)
	}
	f.mu.Unlock()
	for _, sp := range spans {
		c, ok := FromSpan(sp)
		if !ok {
			continue
		}
		for _, s := range subs {
			if s.cutOff.Load() || !s.q.Match(&c) {
				continue
			}
			select {
			case <-s.done:
			case s.c <- c:
			default:
				s.end(true)
			}
		}
	}
}
