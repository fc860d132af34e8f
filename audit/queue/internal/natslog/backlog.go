package natslog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// Backlog is what the stream still holds for a member: its messages not acknowledged yet,
// delivered or not. The stream is a work queue: it deletes a message once its consumer
// acknowledged it (handled and committed, or dead-lettered), so the stream's count for a
// partition's subjects is that partition consumer's NumPending plus NumAckPending.
type Backlog struct {
	// Messages counts the messages of Partitions the stream holds. 0 means this member has
	// handled and acknowledged everything the stream was given for them.
	Messages int
	// Stream counts the messages of every partition the stream holds.
	Stream int
	// Partitions are the partitions Messages counts, in increasing order: those the membership
	// assigns to this member and those it still holds (Held), or every partition while Settled
	// is false.
	Partitions []int
	// Settled is false during about the first PinnedTTL after the start, while the membership
	// may still assign this member's future partitions to a predecessor that died without
	// leaving (a restart after a crash) and the server may keep them pinned to it: Messages
	// then counts every partition, so that a member that has not claimed its partitions yet is
	// not taken for caught up.
	Settled bool
}

// Backlog asks the stream, in one request (its message count per subject), how many messages
// of this member's partitions it holds. Errors wrap ErrUnavailable when the stream cannot be
// asked before ctx ends. It is cheap but not free: a caller polling it (a health check) should
// cache the answer.
func (c *Consumer) Backlog(ctx context.Context) (Backlog, error) {
	s, err := c.streamHandle(ctx)
	if err != nil {
		return Backlog{}, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(c.cfg.SubjectPrefix+".*.*"))
	if err != nil {
		return Backlog{}, fmt.Errorf("stream %s state: %w", c.cfg.Stream, classify(err))
	}
	per := make([]int, c.cfg.Partitions)
	var b Backlog
	for subject, n := range info.State.Subjects {
		if p, ok := partitionOf(c.cfg, subject); ok {
			per[p] += int(n)
			b.Stream += int(n)
		}
	}
	b.Settled = c.ms.settled()
	if b.Settled {
		assigned, _ := c.ms.partitions()
		for _, p := range c.Held() {
			if !slices.Contains(assigned, p) {
				assigned = append(assigned, p)
			}
		}
		slices.Sort(assigned)
		b.Partitions = assigned
	} else {
		b.Partitions = make([]int, c.cfg.Partitions)
		for p := range b.Partitions {
			b.Partitions[p] = p
		}
	}
	for _, p := range b.Partitions {
		b.Messages += per[p]
	}
	return b, nil
}

// streamHandle returns the stream's handle, looked up once.
func (c *Consumer) streamHandle(ctx context.Context) (jetstream.Stream, error) {
	c.streamMu.Lock()
	defer c.streamMu.Unlock()
	if c.stream != nil {
		return c.stream, nil
	}
	s, err := c.js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", c.cfg.Stream, classify(err))
	}
	c.stream = s
	return s, nil
}

// partitionOf returns the partition of a message subject <prefix>.<cluster>.<partition>; ok is
// false for another subject.
func partitionOf(c natsqueue.Config, subject string) (int, bool) {
	rest, found := strings.CutPrefix(subject, c.SubjectPrefix+".")
	if !found {
		return 0, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return 0, false
	}
	p, err := strconv.Atoi(rest[i+1:])
	if err != nil || p < 0 || p >= c.Partitions || strings.Contains(rest[:i], ".") {
		return 0, false
	}
	return p, true
}
