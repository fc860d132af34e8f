package natsqueue

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
	assert.Len(t, ps.ids.order, 2)
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
