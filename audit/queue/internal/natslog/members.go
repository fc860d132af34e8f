package natslog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/nats-io/nats.go/jetstream"
)

// Key prefixes of the members bucket: elastic members announce a random ID, static members
// their index.
const (
	elasticPrefix = "e-"
	staticPrefix  = "s-"
)

// membership decides which partitions this member pulls, from the live members announced in
// the members bucket (see Config.Members). Pins still decide who processes a partition: while
// members disagree (one saw a change the other did not yet), two may pull one partition and the
// server keeps handing it to the pinned one.
type membership struct {
	cfg   natsqueue.Config
	log   *slog.Logger
	kv    jetstream.KeyValue
	key   string
	start time.Time

	mu       sync.Mutex
	live     []string // sorted keys of the live members of this member's kind
	assigned []bool
	cancels  []context.CancelFunc // of the pulls in progress
	changed  chan struct{}        // closed (and replaced) when the assignment changes
	// refreshed is when the last successful refresh began (before it listed the members).
	refreshed time.Time
}

func newMembership(ctx context.Context, js jetstream.JetStream, cfg natsqueue.Config, log *slog.Logger) (*membership, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      membersBucket(cfg),
		Description: "Live Kelemetry audit queue members; an entry expires unless renewed",
		History:     1,
		TTL:         cfg.PinnedTTL,
		Storage:     jetstream.MemoryStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create members bucket %s: %w", membersBucket(cfg), classify(err))
	}
	m := &membership{
		cfg:      cfg,
		log:      log,
		kv:       kv,
		start:    time.Now(),
		assigned: make([]bool, cfg.Partitions),
		cancels:  make([]context.CancelFunc, cfg.Partitions),
		changed:  make(chan struct{}),
	}
	if cfg.Members > 0 {
		m.key = fmt.Sprintf("%s%05d", staticPrefix, cfg.Member)
	} else {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("member ID: %w", err)
		}
		m.key = elasticPrefix + hex.EncodeToString(b[:])
	}
	if err := m.refresh(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// heartbeatEvery is how often a member renews its entry and reads the others'.
func (m *membership) heartbeatEvery() time.Duration {
	return max(m.cfg.PinnedTTL/4, 100*time.Millisecond)
}

// run renews this member's entry and follows the membership until ctx ends.
func (m *membership) run(ctx context.Context) {
	for sleep(ctx, m.heartbeatEvery()) {
		if err := m.refresh(ctx); err != nil && ctx.Err() == nil {
			m.log.Debug("membership", "err", err)
		}
	}
}

// leave removes this member's entry so that the others take its partitions at once.
func (m *membership) leave(ctx context.Context) {
	_ = m.kv.Delete(ctx, m.key)
}

// refresh renews this member's entry, reads the live members and recomputes the assignment.
// When NATS cannot be reached the last assignment stays.
func (m *membership) refresh(ctx context.Context) error {
	now := time.Now()
	if _, err := m.kv.Put(ctx, m.key, []byte(strconv.FormatInt(time.Now().Unix(), 10))); err != nil {
		return fmt.Errorf("announce member: %w", err)
	}
	keys, err := m.kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return fmt.Errorf("list members: %w", err)
	}
	prefix := elasticPrefix
	if m.cfg.Members > 0 {
		prefix = staticPrefix
	}
	live := []string{m.key}
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) && k != m.key {
			live = append(live, k)
		}
	}
	slices.Sort(live)
	m.apply(live, now)
	return nil
}

// settled reports whether the assignment is the one of the members live now rather than of
// the moment this member started: a refresh that began PinnedTTL plus one heartbeat after the
// start succeeded. By then the entry of a predecessor that died without leaving (a restart after
// a crash) has expired (an entry lives PinnedTTL after its last renewal) and a static member's
// start-up grace is over; before, the partitions this member will own may still be assigned to
// that ghost.
func (m *membership) settled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.refreshed.Before(m.start.Add(m.cfg.PinnedTTL + m.heartbeatEvery()))
}

// apply recomputes the assignment from the live members listed at now; it cancels the pulls
// of partitions no longer assigned and wakes the partitions newly assigned.
func (m *membership) apply(live []string, now time.Time) {
	want := m.assignment(live, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live = live
	m.refreshed = now
	changed := false
	for p, a := range want {
		if a == m.assigned[p] {
			continue
		}
		changed = true
		m.assigned[p] = a
		if !a && m.cancels[p] != nil {
			m.cancels[p]()
		}
	}
	if changed {
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// assignment returns which partitions this member pulls given the live members (sorted, this
// member included).
func (m *membership) assignment(live []string, now time.Time) []bool {
	want := make([]bool, m.cfg.Partitions)
	if m.cfg.Members == 0 {
		rank := slices.Index(live, m.key)
		for p := range want {
			want[p] = p%len(live) == rank
		}
		return want
	}
	// Static: a partition's owner is p % Members when live; the partitions of the others go to
	// the live members, p modulo their number. Right after start every member counts as live,
	// so that members starting together each get their own share first.
	alive := map[int]bool{}
	var liveIdx []int
	for _, k := range live {
		if i, err := strconv.Atoi(strings.TrimPrefix(k, staticPrefix)); err == nil && i < m.cfg.Members {
			alive[i] = true
			liveIdx = append(liveIdx, i)
		}
	}
	grace := now.Sub(m.start) < m.cfg.PinnedTTL
	for p := range want {
		owner := p % m.cfg.Members
		if !alive[owner] && !grace {
			owner = liveIdx[p%len(liveIdx)]
		}
		want[p] = owner == m.cfg.Member
	}
	return want
}

// acquire waits until p is assigned to this member and returns a context for pulling it, which
// ends when p is no longer assigned (or ctx ends). ok is false when ctx ended.
func (m *membership) acquire(ctx context.Context, p int) (pctx context.Context, cancel context.CancelFunc, ok bool) {
	for {
		m.mu.Lock()
		if m.assigned[p] {
			pctx, end := context.WithCancel(ctx)
			m.cancels[p] = end
			m.mu.Unlock()
			return pctx, func() {
				m.mu.Lock()
				m.cancels[p] = nil
				m.mu.Unlock()
				end()
			}, true
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, false
		}
	}
}

// isAssigned reports whether p is assigned to this member.
func (m *membership) isAssigned(p int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned[p]
}

// partitions returns the partitions assigned to this member and the number of live members.
func (m *membership) partitions() ([]int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for p, a := range m.assigned {
		if a {
			out = append(out, p)
		}
	}
	return out, len(m.live)
}
