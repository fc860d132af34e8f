package aggregator

import (
	"encoding/binary"
	"hash/fnv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// WindowStart returns the start of the epoch-aligned window of the given length that holds t.
func WindowStart(t time.Time, length time.Duration) time.Time {
	if length <= 0 {
		length = DefaultWindow
	}
	ns := t.UnixNano()
	rem := ns % int64(length)
	if rem < 0 {
		rem += int64(length)
	}
	return time.Unix(0, ns-rem).UTC()
}

// objectHashLen is the length of an ObjectHash.
const objectHashLen = 7

// ObjectHash is the leading part of every trace ID of one object: 56 bits of an FNV-1a hash of
// its key. Its first byte is never 0xff, the marker of the frontend's display IDs.
type ObjectHash [objectHashLen]byte

// traceIDScheme marks byte 7 of the trace IDs TraceIDFor makes, so that ParseTraceID can tell
// them from trace IDs of other origins (and of earlier releases, which hashed the window too).
const traceIDScheme = 0x6b

// HashObject returns the ObjectHash of key.
func HashObject(key ObjectKey) ObjectHash {
	h := fnv.New128a()
	writeKey(h, key)
	var sum [16]byte
	h.Sum(sum[:0])
	var oh ObjectHash
	copy(oh[:], sum[:])
	if oh[0] == 0xff {
		oh[0] = 0xfe
	}
	return oh
}

// TraceIDFor is the trace of one object in the window starting at window.
//
// Layout (16 bytes): the object's ObjectHash (7 bytes), the scheme byte 0x6b, and the window
// start in Unix nanoseconds (8 bytes, big-endian). Every trace ID of an object can thus be
// computed from its key, or from its hash alone, and a trace ID names its object's hash and its
// window: readers of a remote trace backend follow links and resolve display IDs without any
// index or prefix scan. Two objects collide only if their 56-bit hashes are equal and they have
// traces in the same window.
func TraceIDFor(key ObjectKey, window time.Time) trace.TraceID {
	return TraceIDForHash(HashObject(key), window)
}

// TraceIDForHash is TraceIDFor of the object whose hash is oh.
func TraceIDForHash(oh ObjectHash, window time.Time) trace.TraceID {
	var id trace.TraceID
	copy(id[:], oh[:])
	id[objectHashLen] = traceIDScheme
	binary.BigEndian.PutUint64(id[8:], uint64(window.UnixNano()))
	return id
}

// ParseTraceID splits a trace ID made by TraceIDFor into the object's hash and the window start;
// ok is false for trace IDs of other origins.
func ParseTraceID(id trace.TraceID) (oh ObjectHash, window time.Time, ok bool) {
	if id[objectHashLen] != traceIDScheme || id[0] == 0xff {
		return ObjectHash{}, time.Time{}, false
	}
	copy(oh[:], id[:objectHashLen])
	return oh, time.Unix(0, int64(binary.BigEndian.Uint64(id[8:]))).UTC(), true
}

// ObjectSpanID is the root span of a trace.
func ObjectSpanID(tid trace.TraceID) trace.SpanID {
	return spanID(tid, "object")
}

// LinkSpanID is the span in trace tid that points at target with role.
func LinkSpanID(tid trace.TraceID, target ObjectKey, role Role) trace.SpanID {
	return spanID(tid, "link", target.Cluster, target.Group, target.Resource, target.Namespace, target.Name, string(role))
}

// EventSpanID is the span of source record id (from source) in trace tid.
func EventSpanID(tid trace.TraceID, source, id string) trace.SpanID {
	return spanID(tid, "event", source, id)
}

// RequestSpanID is the span in trace tid that stands for the span id (as its source names it,
// e.g. kube-apiserver's span ID in hex) of the request that event span event records. The same
// event and source span give the same ID, so a replay or another replica writes the same span.
func RequestSpanID(tid trace.TraceID, event trace.SpanID, id string) trace.SpanID {
	return spanID(tid, "request", string(event[:]), id)
}

type byteWriter interface{ Write([]byte) (int, error) }

func writeKey(h byteWriter, key ObjectKey) {
	// One write of the parts, each NUL-terminated, from a pooled buffer (FNV is a stream: the
	// same hash as writing them one by one, without a conversion per part).
	bp := keyBufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, s := range [...]string{key.Cluster, key.Group, key.Resource, key.Namespace, key.Name} {
		b = append(b, s...)
		b = append(b, 0)
	}
	_, _ = h.Write(b)
	if cap(b) <= 4<<10 {
		*bp = b
		keyBufs.Put(bp)
	}
}

var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func spanID(tid trace.TraceID, parts ...string) trace.SpanID {
	h := fnv.New64a()
	_, _ = h.Write(tid[:])
	for _, p := range parts {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(p))
	}
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64())
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}
