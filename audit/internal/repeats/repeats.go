package repeats

import (
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// DefaultWebhookRepeatWindow is the default WebhookConfig.RepeatWindow.
const DefaultWebhookRepeatWindow = 100_000

// repeatBodies is how many request bodies (their hashes) the webhook remembers: a body posted
// again whole, as kube-apiserver's retry of a batch is, is answered without being decoded.
const RepeatBodies = 4096

// repeatSet remembers the events (cluster, audit ID and stage, as eventHash) that the webhook
// enqueued lately, so that a batch posted again (kube-apiserver retrying after an answer it did
// not get, a replayed log) is not written to the queue a second time. It is bounded: two
// generations of at most half the window each; when the current one is full, the previous one is
// forgotten (and counted) and the current one becomes the previous. An event is thus remembered
// for at least half the window's events and at most the whole window.
type Set struct {
	mu        sync.Mutex
	cur, prev map[uint64]int32 // the value: the events of a body (bodySet)
	half      int
	forgotten func(n int) // called with the size of each forgotten generation, outside mu
}

func NewSet(window int, forgotten func(int)) *Set {
	half := max(window/2, 1)
	return &Set{cur: make(map[uint64]int32, min(half, 4096)), prev: map[uint64]int32{}, half: half, forgotten: forgotten}
}

// has reports whether the event hash h was added lately.
func (s *Set) Has(h uint64) bool {
	_, ok := s.Get(h)
	return ok
}

func (s *Set) Get(h uint64) (int32, bool) {
	s.mu.Lock()
	v, ok := s.cur[h]
	if !ok {
		v, ok = s.prev[h]
	}
	s.mu.Unlock()
	return v, ok
}

// put remembers h with v, forgetting the older generation if the current one is full.
func (s *Set) Put(h uint64, v int32) {
	s.mu.Lock()
	dropped := s.putLocked(h, v)
	s.mu.Unlock()
	if dropped > 0 && s.forgotten != nil {
		s.forgotten(dropped)
	}
}

func (s *Set) putLocked(h uint64, v int32) (dropped int) {
	if len(s.cur) >= s.half {
		dropped = len(s.prev)
		s.prev, s.cur = s.cur, make(map[uint64]int32, min(s.half, 4096))
	}
	s.cur[h] = v
	return dropped
}

// add remembers the events of a batch that was enqueued.
func (s *Set) Add(cluster string, events []*auditv1.Event) {
	dropped := 0
	s.mu.Lock()
	for _, ev := range events {
		dropped += s.putLocked(EventHash(cluster, ev.AuditID, ev.Stage), 0)
	}
	s.mu.Unlock()
	if dropped > 0 && s.forgotten != nil {
		s.forgotten(dropped)
	}
}

// filter returns the events of the batch that were not added lately, in order, and how many were
// left out. It returns events itself when none was.
func (s *Set) Filter(cluster string, events []*auditv1.Event) ([]*auditv1.Event, int) {
	kept := KeepEvents(events, func(ev *auditv1.Event) bool { return !s.Has(EventHash(cluster, ev.AuditID, ev.Stage)) })
	return kept, len(events) - len(kept)
}

// keepEvents returns the events for which keep is true, in order: events itself when it is true
// for all of them, else a new slice.
func KeepEvents(events []*auditv1.Event, keep func(*auditv1.Event) bool) []*auditv1.Event {
	var kept []*auditv1.Event
	for i, ev := range events {
		if keep(ev) {
			if kept != nil {
				kept = append(kept, ev)
			}
			continue
		}
		if kept == nil {
			kept = make([]*auditv1.Event, i, len(events)-1)
			copy(kept, events[:i])
		}
	}
	if kept == nil {
		return events
	}
	return kept
}

// bodySeed keys the request body hashes: random per process, so that no one can craft bodies
// that collide.
var bodySeed = maphash.MakeSeed()

// bodyHash identifies a request body posted for cluster. The body is hashed as a string by
// maphash.Comparable, which is one call of the runtime's hash over the whole body: maphash.Bytes
// and maphash.String call it for each 128 bytes, which made the hashing 5.5% of the all-in-one's
// instructions for the bulk fixture (scripts/instructions.sh) and four times as slow.
func BodyHash(cluster string, body []byte) uint64 {
	whole := unsafe.String(unsafe.SliceData(body), len(body))
	return maphash.Comparable(bodySeed, whole) ^ maphash.String(bodySeed, cluster)*0x9e3779b97f4a7c15
}

// eventHash is FNV-1a (64 bits) over cluster, audit ID and stage, NUL-separated. The audit ID may
// be the decoder's bytes (the webhook's repeat check, before the event's strings exist).
func EventHash[T ~string | ~[]byte](cluster string, auditID T, stage string) uint64 {
	h := uint64(14695981039346656037)
	h = fnvString(h, cluster)
	for i := 0; i < len(auditID); i++ {
		h ^= uint64(auditID[i])
		h *= 1099511628211
	}
	h *= 1099511628211 // separator
	return fnvString(h, stage)
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h * 1099511628211 // separator
}
