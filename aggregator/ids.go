package aggregator

import (
	"encoding/binary"
	"hash/fnv"
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

// TraceIDFor is the trace of one object in the window starting at window.
func TraceIDFor(key ObjectKey, window time.Time) trace.TraceID {
	h := fnv.New128a()
	writeKey(h, key)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(window.UnixNano()))
	_, _ = h.Write(b[:])
	var id trace.TraceID
	h.Sum(id[:0])
	if !id.IsValid() {
		id[15] = 1
	}
	return id
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

type byteWriter interface{ Write([]byte) (int, error) }

func writeKey(h byteWriter, key ObjectKey) {
	for _, s := range [...]string{key.Cluster, key.Group, key.Resource, key.Namespace, key.Name} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
}

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
