package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Span encoding, version 2. All integers are varints; strings are a uvarint length and the bytes.
//
//	version(2) traceID(16) spanID(8) parentID(8) flags(1) kind(1) [kind string when kind=0]
//	source(name) name object(7 strings)
//	[window: varint unix nanos] [start: varint, relative to window] [end: varint, relative to start]
//	attrs: count, then key(name) value ...
//	logs: count, then for each: hasTime(1) [varint time relative to start] type(name) message attrs
//	[link: target(7 strings) role class]
//
// A name is one byte: 1 + the index of a well-known string (wellKnown), or 0 followed by the
// string. Version 1 (still read) is the same with every name written as a string: attribute keys
// were a fifth of the bytes of a typical span.
//
// Times are decoded in UTC; a zero time stays zero (flags). Supported times are those
// time.Time.UnixNano can represent (years 1678 to 2262).

const (
	spanEncodingVersion = 2 // written
	spanEncodingV1      = 1 // still read
	// refEncodingVersion is the version byte of an object reference value (unchanged since 1).
	refEncodingVersion = 1
)

// wellKnown are the names (attribute keys, log types, span sources) that version 2 writes as one
// byte. The list is part of the format: an entry is never removed, changed or moved, and a new
// one needs a new encoding version.
var wellKnown = [...]string{
	// span sources and log types
	"audit", "event", "object", "link", "error", "cause", "message", "diff", "snapshot", "kelemetry",
	// object and audit attributes
	"k8s.cluster.name", "k8s.namespace.name", "kelemetry.object.group", "kelemetry.object.version",
	"kelemetry.object.resource", "kelemetry.object.name", "kelemetry.object.uid",
	"user.name", "user_agent.original", "http.response.status_code", "client.address",
	"kelemetry.audit.id", "kelemetry.audit.verb", "kelemetry.audit.subresource",
	"kelemetry.audit.impersonator", "kelemetry.audit.proxy_ips", "kelemetry.audit.resource_version",
	"kelemetry.audit.response_resource_version", "kelemetry.audit.label_selector",
	"kelemetry.audit.field_selector", "kelemetry.audit.propagation_policy",
	"kelemetry.audit.collection_size", "kelemetry.audit.deletion", "kelemetry.audit.finalizers",
	// links
	"kelemetry.link.cluster", "kelemetry.link.group", "kelemetry.link.resource",
	"kelemetry.link.namespace", "kelemetry.link.name", "kelemetry.link.role", "kelemetry.link.class",
	// diffs and snapshots
	"kelemetry.diff.path", "kelemetry.diff.op", "kelemetry.diff.old", "kelemetry.diff.new",
	"kelemetry.diff.redacted", "kelemetry.diff.truncated", "kelemetry.diff.base_resource_version",
	"kelemetry.diff.informer_latency", "kelemetry.snapshot.kind", "kelemetry.snapshot.resource_version",
	"kelemetry.snapshot.source",
	// Kubernetes Events
	"kelemetry.event.reason", "kelemetry.event.type", "kelemetry.event.action",
	"kelemetry.event.reporting_controller", "kelemetry.event.reporting_instance",
	"kelemetry.event.count", "kelemetry.event.uid", "kelemetry.event.name",
	"kelemetry.event.field_path", "kelemetry.event.first_timestamp", "kelemetry.event.last_timestamp",
	"kelemetry.event.related.group", "kelemetry.event.related.resource",
	"kelemetry.event.related.namespace", "kelemetry.event.related.name",
}

// wellKnownCode is the byte of each well-known name.
var wellKnownCode = func() map[string]byte {
	m := make(map[string]byte, len(wellKnown))
	for i, s := range wellKnown {
		m[s] = byte(i + 1)
	}
	return m
}()

// appendName appends a name: its well-known byte, or 0 and the string.
func appendName(b []byte, s string) []byte {
	if c, ok := wellKnownCode[s]; ok {
		return append(b, c)
	}
	return appendString(append(b, 0), s)
}

const (
	flagError = 1 << iota
	flagLink
	flagNoWindow
	flagNoStart
	flagNoEnd
)

var errCorrupt = errors.New("corrupt encoding")

func kindCode(k aggregator.SpanKind) byte {
	switch k {
	case aggregator.KindObject:
		return 1
	case aggregator.KindLink:
		return 2
	case aggregator.KindEvent:
		return 3
	default:
		return 0
	}
}

var kindByCode = [...]aggregator.SpanKind{1: aggregator.KindObject, 2: aggregator.KindLink, 3: aggregator.KindEvent}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRef(b []byte, r *aggregator.ObjectRef) []byte {
	b = appendString(b, r.Cluster)
	b = appendString(b, r.Group)
	b = appendString(b, r.Version)
	b = appendString(b, r.Resource)
	b = appendString(b, r.Namespace)
	b = appendString(b, r.Name)
	return appendString(b, r.UID)
}

func appendAttrs(b []byte, attrs aggregator.Attrs) []byte {
	b = binary.AppendUvarint(b, uint64(len(attrs)))
	for i := range attrs {
		b = appendName(b, attrs[i].Key)
		b = appendString(b, attrs[i].Value)
	}
	return b
}

// appendSpan appends the encoding of sp to b.
func appendSpan(b []byte, sp *aggregator.Span) []byte {
	b = append(b, spanEncodingVersion)
	b = append(b, sp.TraceID[:]...)
	b = append(b, sp.SpanID[:]...)
	b = append(b, sp.ParentID[:]...)
	var flags byte
	if sp.Error {
		flags |= flagError
	}
	if sp.Link != nil {
		flags |= flagLink
	}
	if sp.Window.IsZero() {
		flags |= flagNoWindow
	}
	if sp.Start.IsZero() {
		flags |= flagNoStart
	}
	if sp.End.IsZero() {
		flags |= flagNoEnd
	}
	code := kindCode(sp.Kind)
	b = append(b, flags, code)
	if code == 0 {
		b = appendString(b, string(sp.Kind))
	}
	b = appendName(b, sp.Source)
	b = appendString(b, sp.Name)
	b = appendRef(b, &sp.Object)

	var base int64
	if !sp.Window.IsZero() {
		base = sp.Window.UnixNano()
		b = binary.AppendVarint(b, base)
	}
	if !sp.Start.IsZero() {
		start := sp.Start.UnixNano()
		b = binary.AppendVarint(b, start-base)
		base = start
	}
	if !sp.End.IsZero() {
		b = binary.AppendVarint(b, sp.End.UnixNano()-base)
	}
	b = appendAttrs(b, sp.Attributes)
	b = binary.AppendUvarint(b, uint64(len(sp.Logs)))
	for i := range sp.Logs {
		l := &sp.Logs[i]
		if l.Time.IsZero() {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = binary.AppendVarint(b, l.Time.UnixNano()-base)
		}
		b = appendName(b, l.Type)
		b = appendString(b, l.Message)
		b = appendAttrs(b, l.Attributes)
	}
	if sp.Link != nil {
		b = appendRef(b, &sp.Link.Target)
		b = appendString(b, string(sp.Link.Role))
		b = appendString(b, sp.Link.Class)
	}
	return b
}

// decoder reads an encoding held in one string, so that decoded strings share its memory.
type decoder struct {
	s     string
	off   int
	err   bool
	ar    *spanArena // when set, attributes, logs and links are cut from its slabs
	names bool       // names are written as in version 2 (else as strings)
}

// spanArena hands out the attribute and log slices and the links of the spans of one trace from
// shared slabs. Each slice is cut with its capacity at its length, so an append to one span's
// attributes copies them rather than overwriting the next span's. A trace's first slabs of
// attributes and logs are sized from its number of spans and the attributes and logs per span
// seen so far, its slab of links from its link spans (setLinks); slabs are never shared between
// traces, so a trace kept (in a cache) keeps only its own.
type spanArena struct {
	attrSlab  aggregator.Attrs
	logSlab   []aggregator.Log
	linkSlab  []aggregator.Link
	spans     int // decoded so far, over all traces
	nAttrs    int // handed out so far, over all traces
	nLogs     int
	attrsHint int // for the current trace's next slab
	logsHint  int
	// lastRef is the encoded object reference of the trace's span decoded last; lastObj is it
	// decoded.
	lastRef string
	lastObj aggregator.ObjectRef
}

// reset starts a trace of n spans.
func (a *spanArena) reset(n int) {
	a.attrSlab, a.logSlab = nil, nil
	a.lastRef, a.lastObj = "", aggregator.ObjectRef{}
	perSpan := func(total int) int {
		if a.spans == 0 {
			return 2 * n
		}
		return int(int64(total)*int64(n)/int64(a.spans)) + n/8 + 1
	}
	a.attrsHint, a.logsHint = min(perSpan(a.nAttrs), 1<<14), min(perSpan(a.nLogs), 1<<13)
	a.spans += n
}

// spanFlagsAt is where a span's encoding (every version) holds its flags: after the version, the
// trace ID, the span ID and the parent's.
const spanFlagsAt = 1 + traceIDLen + 2*spanIDLen

// encodedLink reports whether the encoded span v is a link span.
func encodedLink(v string) bool { return len(v) > spanFlagsAt && v[spanFlagsAt]&flagLink != 0 }

// setLinks sizes the trace's slab of links: links is how many of its spans are links.
func (a *spanArena) setLinks(links int) {
	a.linkSlab = nil
	if links > 0 {
		a.linkSlab = make([]aggregator.Link, links)
	}
}

func (a *spanArena) attrs(n int) aggregator.Attrs {
	a.nAttrs += n
	if n > len(a.attrSlab) {
		// The hint fell short: each further slab of the trace is half the one before.
		a.attrSlab = make(aggregator.Attrs, max(n, a.attrsHint))
		a.attrsHint = max(a.attrsHint/2, 4)
	}
	out := a.attrSlab[:n:n]
	a.attrSlab = a.attrSlab[n:]
	return out
}

// link returns a zero Link of the trace's slab (link spans are most of a trace that holds a
// parent's children), or a new one when setLinks was not told of it.
func (a *spanArena) link() *aggregator.Link {
	if len(a.linkSlab) == 0 {
		return &aggregator.Link{}
	}
	l := &a.linkSlab[0]
	a.linkSlab = a.linkSlab[1:]
	return l
}

func (a *spanArena) logs(n int) []aggregator.Log {
	a.nLogs += n
	if n > len(a.logSlab) {
		a.logSlab = make([]aggregator.Log, max(n, a.logsHint))
		a.logsHint = max(a.logsHint/2, 4)
	}
	out := a.logSlab[:n:n]
	a.logSlab = a.logSlab[n:]
	return out
}

func (d *decoder) byte() byte {
	if d.off >= len(d.s) {
		d.err = true
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint() uint64 {
	var x uint64
	var shift uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if d.off >= len(d.s) {
			break
		}
		c := d.s[d.off]
		d.off++
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.err = true
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.s)-d.off) {
		d.err = true
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) bytes(dst []byte) {
	if len(d.s)-d.off < len(dst) {
		d.err = true
		return
	}
	d.off += copy(dst, d.s[d.off:])
}

// count reads a collection length and rejects one that cannot fit in the remaining input
// (every element takes at least min bytes).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err || n > uint64((len(d.s)-d.off)/min) {
		d.err = true
		return 0
	}
	return int(n)
}

// name reads a name (see appendName), or a string in version 1.
func (d *decoder) name() string {
	if !d.names {
		return d.string()
	}
	switch c := d.byte(); {
	case c == 0:
		return d.string()
	case int(c) <= len(wellKnown):
		return wellKnown[c-1]
	default:
		d.err = true
		return ""
	}
}

func (d *decoder) ref(r *aggregator.ObjectRef) {
	r.Cluster = d.string()
	r.Group = d.string()
	r.Version = d.string()
	r.Resource = d.string()
	r.Namespace = d.string()
	r.Name = d.string()
	r.UID = d.string()
}

func (d *decoder) attrs() aggregator.Attrs {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	var attrs aggregator.Attrs
	if d.ar != nil {
		attrs = d.ar.attrs(n)
	} else {
		attrs = make(aggregator.Attrs, n)
	}
	for i := range attrs {
		attrs[i].Key = d.name()
		attrs[i].Value = d.string()
	}
	return attrs
}

// decodeSpan decodes an encoding made by appendSpan.
func decodeSpan(data []byte) (*aggregator.Span, error) {
	sp := &aggregator.Span{}
	if err := decodeSpanInto(sp, string(data)); err != nil {
		return nil, err
	}
	return sp, nil
}

// decodeSpanInto decodes an encoding made by appendSpan into *sp (zero); its strings are
// substrings of data.
func decodeSpanInto(sp *aggregator.Span, data string) error {
	return decodeSpanWith(sp, data, nil)
}

// decodeSpanWith is decodeSpanInto with the span's attributes and logs cut from ar (when not
// nil).
func decodeSpanWith(sp *aggregator.Span, data string, ar *spanArena) error {
	d := decoder{s: data, ar: ar}
	switch v := d.byte(); v {
	case spanEncodingVersion:
		d.names = true
	case spanEncodingV1:
	default:
		return fmt.Errorf("decode span: unknown encoding version %d: %w", v, errCorrupt)
	}
	d.bytes(sp.TraceID[:])
	d.bytes(sp.SpanID[:])
	d.bytes(sp.ParentID[:])
	flags := d.byte()
	code := d.byte()
	switch {
	case code == 0:
		sp.Kind = aggregator.SpanKind(d.string())
	case int(code) < len(kindByCode):
		sp.Kind = kindByCode[code]
	default:
		d.err = true
	}
	sp.Source = d.name()
	sp.Name = d.string()
	// The spans of a trace are of one object: a reference encoded as the one before is that
	// one (the encoding is self-delimiting), which spares parsing its seven strings again.
	if ar != nil && ar.lastRef != "" && !d.err && d.off <= len(d.s) && strings.HasPrefix(d.s[d.off:], ar.lastRef) {
		sp.Object = ar.lastObj
		d.off += len(ar.lastRef)
	} else {
		start := d.off
		d.ref(&sp.Object)
		if ar != nil && !d.err {
			ar.lastRef, ar.lastObj = d.s[start:d.off], sp.Object
		}
	}

	var base int64
	if flags&flagNoWindow == 0 {
		base = d.varint()
		sp.Window = query.UnixTime(base)
	}
	if flags&flagNoStart == 0 {
		base += d.varint()
		sp.Start = query.UnixTime(base)
	}
	if flags&flagNoEnd == 0 {
		sp.End = query.UnixTime(base + d.varint())
	}
	sp.Attributes = d.attrs()
	if n := d.count(4); n > 0 {
		if ar != nil {
			sp.Logs = ar.logs(n)
		} else {
			sp.Logs = make([]aggregator.Log, n)
		}
		for i := range sp.Logs {
			l := &sp.Logs[i]
			if d.byte() != 0 {
				l.Time = query.UnixTime(base + d.varint())
			}
			l.Type = d.name()
			l.Message = d.string()
			l.Attributes = d.attrs()
		}
	}
	sp.Error = flags&flagError != 0
	if flags&flagLink != 0 {
		if d.ar != nil {
			sp.Link = d.ar.link()
		} else {
			sp.Link = &aggregator.Link{}
		}
		d.ref(&sp.Link.Target)
		sp.Link.Role = aggregator.Role(d.string())
		sp.Link.Class = d.string()
	}
	if d.err || d.off != len(d.s) {
		return fmt.Errorf("decode span: %w", errCorrupt)
	}
	return nil
}

// Object reference encoding: version(1) and the 7 strings of appendRef.

func appendRefValue(b []byte, r *aggregator.ObjectRef) []byte {
	return appendRef(append(b, refEncodingVersion), r)
}

func decodeRefValue(data []byte) (aggregator.ObjectRef, error) {
	var r aggregator.ObjectRef
	d := decoder{s: string(data)}
	if v := d.byte(); v != refEncodingVersion {
		return r, fmt.Errorf("decode object: unknown encoding version %d: %w", v, errCorrupt)
	}
	d.ref(&r)
	if d.err || d.off != len(d.s) {
		return r, fmt.Errorf("decode object: %w", errCorrupt)
	}
	return r, nil
}

// Keys. Windows are Unix nanoseconds with the sign bit flipped, big endian, so that byte order
// is time order.
//
//	's' window(8) segment(1) traceID(16) spanID(8)      -> span (windows from segFrom on)
//	's' window(8) traceID(16) spanID(8)                 -> span (windows before segFrom)
//	'o' cluster/group/resource/namespace/name 0x00 window(8) traceID(16) -> object reference
//	'o' cluster/group/resource/namespace/name 0x00 window(8) traceID(16) segment(1) -> empty
//	                                                     (the trace has spans in that segment)
//	'w' window(8) traceID(16)                            -> cluster/group/resource/namespace/name
//	't' traceID(16) window(8)                            -> empty (windows before traceIdxTo:
//	                                                     traceindex.go)
//
// The object part of 'o' keys is aggregator.ObjectKey.String, so key order is the order
// FindObjects returns. The 0x00 separator sorts before every byte a name can hold.
const (
	prefixSpan   = 's'
	prefixObject = 'o'
	prefixWindow = 'w'
	prefixTrace  = 't'
)

const (
	windowLen   = 8
	traceIDLen  = len(trace.TraceID{})
	spanIDLen   = len(trace.SpanID{})
	spanKeyLen  = 1 + windowLen + traceIDLen + spanIDLen
	winKeyLen   = 1 + windowLen + traceIDLen
	traceKeyLen = 1 + traceIDLen + windowLen
	objSuffix   = 1 + windowLen + traceIDLen // after the object string
)

func appendWindow(b []byte, ns int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ns)^(1<<63))
}

func readWindow(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

func appendObjectString(b []byte, r *aggregator.ObjectRef) []byte {
	b = append(b, r.Cluster...)
	b = append(b, '/')
	b = append(b, r.Group...)
	b = append(b, '/')
	b = append(b, r.Resource...)
	b = append(b, '/')
	b = append(b, r.Namespace...)
	b = append(b, '/')
	return append(b, r.Name...)
}

// appendSpanKey appends the key of span sid of trace tid in window, in segment seg (from 0) or,
// with seg -1, in the layout without segments.
func appendSpanKey(b []byte, window int64, seg int, tid trace.TraceID, sid trace.SpanID) []byte {
	return append(appendSpanPrefix(b, window, seg, tid), sid[:]...)
}

// appendSpanPrefix appends the prefix of the span keys of trace tid in window and segment seg
// (-1: the layout without segments).
func appendSpanPrefix(b []byte, window int64, seg int, tid trace.TraceID) []byte {
	b = append(b, prefixSpan)
	b = appendWindow(b, window)
	if seg >= 0 {
		b = append(b, byte(seg))
	}
	return append(b, tid[:]...)
}

func appendObjectKey(b []byte, object []byte, window int64, tid trace.TraceID) []byte {
	b = append(b, prefixObject)
	b = append(b, object...)
	b = append(b, 0)
	b = appendWindow(b, window)
	return append(b, tid[:]...)
}

func appendWindowKey(b []byte, window int64, tid trace.TraceID) []byte {
	b = append(b, prefixWindow)
	b = appendWindow(b, window)
	return append(b, tid[:]...)
}

func appendTraceKey(b []byte, tid trace.TraceID, window int64) []byte {
	b = append(b, prefixTrace)
	b = append(b, tid[:]...)
	return appendWindow(b, window)
}

// prefixEnd returns the smallest key after every key that starts with prefix.
func prefixEnd(prefix []byte) []byte { return appendPrefixEnd(nil, prefix) }

// appendPrefixEnd is prefixEnd into dst[:0] (dst and prefix must not overlap).
func appendPrefixEnd(dst, prefix []byte) []byte {
	end := append(dst[:0], prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // every byte was 0xff: no upper bound
}
