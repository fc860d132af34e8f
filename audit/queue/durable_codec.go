package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/kelemetry/kelemetry/audit/auditv1"
)

// The durable queue stores a batch as a compact binary record of its decoded events, written and
// read back without JSON: strings and raw bodies with varint lengths, timestamps in time's binary
// form. Encoding costs a copy of the bytes; re-encoding JSON would cost several times more.

// errShortRecord means a stored batch ends before its last field.
var errShortRecord = errors.New("audit queue record truncated")

// codecFields is the number of fields of Event the codec writes: a test fails when Event grows a
// field the codec does not know about.
const codecFields = 18

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBytes writes a byte slice, keeping nil apart from empty.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

func appendStrings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	for _, s := range v {
		b = appendString(b, s)
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendUser(b []byte, u *auditv1.UserInfo) []byte {
	b = appendString(b, u.Username)
	b = appendString(b, u.UID)
	return appendStrings(b, u.Groups)
}

func appendTime(b []byte, t time.Time) []byte {
	tb, err := t.MarshalBinary()
	if err != nil {
		// Only a zone offset that is not a whole minute fails: keep the instant in UTC.
		tb, _ = t.UTC().MarshalBinary()
	}
	return appendBytes(b, tb)
}

// appendBatch appends the record of a batch of events from cluster to b.
func appendBatch(b []byte, cluster string, events []*auditv1.Event) []byte {
	b = appendString(b, cluster)
	b = binary.AppendUvarint(b, uint64(len(events)))
	for _, ev := range events {
		b = appendEvent(b, ev)
	}
	return b
}

func appendEvent(b []byte, ev *auditv1.Event) []byte {
	for _, s := range [...]string{ev.Kind, ev.APIVersion, ev.Level, ev.AuditID, ev.Stage, ev.RequestURI, ev.Verb, ev.UserAgent} {
		b = appendString(b, s)
	}
	b = appendUser(b, &ev.User)
	b = appendBool(b, ev.ImpersonatedUser != nil)
	if ev.ImpersonatedUser != nil {
		b = appendUser(b, ev.ImpersonatedUser)
	}
	b = appendStrings(b, ev.SourceIPs)
	b = appendBool(b, ev.ObjectRef != nil)
	if r := ev.ObjectRef; r != nil {
		for _, s := range [...]string{r.Resource, r.Namespace, r.Name, r.UID, r.APIGroup, r.APIVersion, r.ResourceVersion, r.Subresource} {
			b = appendString(b, s)
		}
	}
	b = appendBool(b, ev.ResponseStatus != nil)
	if st := ev.ResponseStatus; st != nil {
		b = appendString(b, st.Status)
		b = appendString(b, st.Message)
		b = appendString(b, st.Reason)
		b = binary.AppendVarint(b, int64(st.Code))
		b = appendBool(b, st.Details != nil)
		if st.Details != nil {
			causes := st.Details.Causes
			if causes == nil {
				b = append(b, 0)
			} else {
				b = binary.AppendUvarint(b, uint64(len(causes))+1)
			}
			for _, c := range causes {
				b = appendString(b, c.Type)
				b = appendString(b, c.Message)
				b = appendString(b, c.Field)
			}
		}
	}
	b = appendBytes(b, ev.RequestObject)
	b = appendBytes(b, ev.ResponseObject)
	b = appendTime(b, ev.RequestReceivedTimestamp)
	b = appendTime(b, ev.StageTimestamp)
	if ev.Annotations == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(ev.Annotations))+1)
	for k, v := range ev.Annotations {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}

// recordReader reads a record written by appendBatch. The first error sticks: later reads return
// zero values, so a truncated or corrupt record fails once, at the end, and never panics.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShortRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errShortRecord)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// take returns the next n bytes, aliasing the record.
func (r *recordReader) take(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail(errShortRecord)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) str() string { return string(r.take(r.uvarint())) }

func (r *recordReader) bytes() []byte {
	n := r.uvarint()
	if n == 0 {
		return nil
	}
	return r.take(n - 1)
}

// count reads a nil-aware element count; ok is false for nil. It refuses counts larger than the
// bytes left, each element taking at least one byte.
func (r *recordReader) count() (n int, ok bool) {
	v := r.uvarint()
	if v == 0 {
		return 0, false
	}
	if v-1 > uint64(len(r.b)) {
		r.fail(errShortRecord)
		return 0, false
	}
	return int(v - 1), true
}

func (r *recordReader) strings() []string {
	n, ok := r.count()
	if !ok {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = r.str()
	}
	return v
}

func (r *recordReader) flag() bool {
	b := r.take(1)
	return len(b) == 1 && b[0] != 0
}

func (r *recordReader) user(u *auditv1.UserInfo) {
	u.Username = r.str()
	u.UID = r.str()
	u.Groups = r.strings()
}

func (r *recordReader) time() time.Time {
	var t time.Time
	if b := r.bytes(); r.err == nil {
		if err := t.UnmarshalBinary(b); err != nil {
			r.fail(fmt.Errorf("audit queue record: timestamp: %w", err))
		}
	}
	return t
}

// decodeBatch reads a record written by appendBatch. The events alias data.
func decodeBatch(data []byte) (cluster string, events []*auditv1.Event, err error) {
	r := &recordReader{b: data}
	cluster = r.str()
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return "", nil, errShortRecord
	}
	events = make([]*auditv1.Event, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		events = append(events, r.event())
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("audit queue record: %d bytes after the last event", len(r.b))
	}
	if r.err != nil {
		return "", nil, r.err
	}
	return cluster, events, nil
}

func (r *recordReader) event() *auditv1.Event {
	ev := &auditv1.Event{}
	for _, p := range [...]*string{&ev.Kind, &ev.APIVersion, &ev.Level, &ev.AuditID, &ev.Stage, &ev.RequestURI, &ev.Verb, &ev.UserAgent} {
		*p = r.str()
	}
	r.user(&ev.User)
	if r.flag() {
		ev.ImpersonatedUser = &auditv1.UserInfo{}
		r.user(ev.ImpersonatedUser)
	}
	ev.SourceIPs = r.strings()
	if r.flag() {
		ref := &auditv1.ObjectReference{}
		for _, p := range [...]*string{&ref.Resource, &ref.Namespace, &ref.Name, &ref.UID, &ref.APIGroup, &ref.APIVersion, &ref.ResourceVersion, &ref.Subresource} {
			*p = r.str()
		}
		ev.ObjectRef = ref
	}
	if r.flag() {
		st := &auditv1.Status{Status: r.str(), Message: r.str(), Reason: r.str(), Code: int32(r.varint())}
		if r.flag() {
			st.Details = &auditv1.StatusDetails{}
			if n, ok := r.count(); ok {
				st.Details.Causes = make([]auditv1.StatusCause, n)
				for i := range st.Details.Causes {
					c := &st.Details.Causes[i]
					c.Type, c.Message, c.Field = r.str(), r.str(), r.str()
				}
			}
		}
		ev.ResponseStatus = st
	}
	ev.RequestObject = r.bytes()
	ev.ResponseObject = r.bytes()
	ev.RequestReceivedTimestamp = r.time()
	ev.StageTimestamp = r.time()
	if n, ok := r.count(); ok {
		ev.Annotations = make(map[string]string, n)
		for range n {
			k := r.str()
			ev.Annotations[k] = r.str()
		}
	}
	return ev
}
