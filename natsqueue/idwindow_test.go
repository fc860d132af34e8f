package natsqueue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIDWindow(t *testing.T) {
	w := newIDWindow(2)
	w.add("", 1)
	assert.False(t, w.duplicate("", 2), "messages without an ID are never duplicates")
	w.add("a", 1)
	w.add("b", 2)
	assert.False(t, w.duplicate("a", 1), "the same message (a redelivery) is no duplicate")
	assert.True(t, w.duplicate("a", 3), "another sequence with a known ID")
	w.add("a", 3) // known: keeps its first sequence and its place
	assert.True(t, w.duplicate("a", 3))
	w.add("c", 4) // the bound forgets the oldest, a
	assert.False(t, w.duplicate("a", 3))
	assert.True(t, w.duplicate("b", 5))
	assert.True(t, w.duplicate("c", 5))
	assert.Len(t, w.seq, 2)
	assert.Len(t, w.order, 2)
}

func TestKnownCommitted(t *testing.T) {
	ps := &partition{recent: map[uint64]struct{}{}, ids: newIDWindow(4)}
	ps.ids.add("a", 1) // accepted
	assert.False(t, ps.knownCommitted("a", 1), "accepted, not committed yet")
	ps.remember(1, 4) // committed
	assert.True(t, ps.knownCommitted("a", 1))
	assert.False(t, ps.knownCommitted("a", 2), "another sequence: a second copy, not this message")
	assert.False(t, ps.knownCommitted("b", 1), "a reused sequence with another ID (a recreated stream)")
	assert.False(t, ps.knownCommitted("", 1), "no ID")
}
