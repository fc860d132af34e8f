package natslog

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIDWindow(t *testing.T) {
	ps := &partition{ids: newLastN[string, uint64](2)}
	ps.accept("", 1)
	_, dup := ps.secondCopy("", 2)
	assert.False(t, dup, "messages without an ID are never duplicates")
	ps.accept("a", 1)
	ps.accept("b", 2)
	_, dup = ps.secondCopy("a", 1)
	assert.False(t, dup, "the same message (a redelivery) is no duplicate")
	first, dup := ps.secondCopy("a", 3)
	assert.True(t, dup, "another sequence with a known ID")
	assert.Equal(t, uint64(1), first)
	ps.accept("a", 3) // known: keeps its first sequence and its place
	_, dup = ps.secondCopy("a", 3)
	assert.True(t, dup)
	ps.accept("c", 4) // the bound forgets the oldest, a
	_, dup = ps.secondCopy("a", 3)
	assert.False(t, dup)
	_, dup = ps.secondCopy("b", 5)
	assert.True(t, dup)
	_, dup = ps.secondCopy("c", 5)
	assert.True(t, dup)
	assert.Len(t, ps.ids.m, 2)
	assert.Equal(t, 2, ps.ids.len())
}

func TestKnownCommitted(t *testing.T) {
	ps := &partition{recent: newLastN[uint64, struct{}](4), ids: newLastN[string, uint64](4)}
	ps.accept("a", 1)
	assert.False(t, ps.knownCommitted("a", 1), "accepted, not committed yet")
	ps.remember(1) // committed
	assert.True(t, ps.knownCommitted("a", 1))
	assert.False(t, ps.knownCommitted("a", 2), "another sequence: a second copy, not this message")
	assert.False(t, ps.knownCommitted("b", 1), "a reused sequence with another ID (a recreated stream)")
	assert.False(t, ps.knownCommitted("", 1), "no ID")
}

// TestLastNKeepsTheLastBound adds keys (with repeats) beyond the bound, round the ring several
// times, and checks after every add that exactly the last bound distinct keys are held, with the
// value each was first added with.
func TestLastNKeepsTheLastBound(t *testing.T) {
	const bound = 5
	w := newLastN[int, int](bound)
	var order []int        // distinct keys in the order first added (while held)
	first := map[int]int{} // the value a held key was added with
	for i := range 40 {
		k := i
		if i%3 == 2 {
			k = i - 1 // a repeat of a key added just before: no new place
		}
		w.add(k, i)
		if _, ok := first[k]; !ok {
			first[k] = i
			order = append(order, k)
			if len(order) > bound {
				delete(first, order[0])
				order = order[1:]
			}
		}
		assert.Equal(t, len(order), w.len(), "after adding %d", k)
		for _, held := range order {
			v, ok := w.get(held)
			assert.True(t, ok, "key %d is among the last %d", held, bound)
			assert.Equal(t, first[held], v, "key %d keeps its first value", held)
		}
		if len(order) == bound {
			assert.False(t, w.has(order[0]-2), "key %d was forgotten", order[0]-2)
		}
	}
	assert.Equal(t, 4096, windowSize(8), "a small MaxInFlight still remembers 4,096 messages")
	assert.Equal(t, 8*1000, windowSize(1000))
}
