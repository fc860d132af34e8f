// Package changefeed is the cluster-wide feed of writes: every create, update, patch, delete and
// deletecollection the audit stream carried, with its user, outcome and changed fields, in time
// order across objects. The stores index the writes' event spans by time (Change, Append,
// Decode) and answer a Query newest first, reading about what they return; the HTTP API
// (internal/query) serves them as GET /api/changes, live with follow=1.
package changefeed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
)

// Change is one write as the feed lists it.
type Change struct {
	// Time is when the request was received, End when it completed.
	Time, End time.Time
	// Object is the object written (the parent object of a subresource).
	Object aggregator.ObjectRef
	// User made the write; Impersonator is who impersonated User, if anyone.
	User, Impersonator, UserAgent string
	Verb, Subresource             string
	// Code is the response code (0 when not recorded).
	Code int
	// Title is the event's title ("admin patch scale"); AuditID the audit event's ID.
	Title, AuditID string
	// Paths are the changed field paths of the write's diff, in its order, without bookkeeping
	// fields (metadata.resourceVersion, generation, managedFields).
	Paths []string
	// Diff are the write's diff lines ("spec.replicas 2 -> 4"), on the changes of a live tail
	// only: the index keeps the paths, the trace keeps the diff.
	Diff []string
	// TraceID and SpanID locate the write's event span; Window is its trace's window.
	TraceID trace.TraceID
	SpanID  trace.SpanID
	Window  time.Time
}

// writeVerbs are the verbs the feed lists.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// IsWriteVerb reports whether the feed lists writes of this verb.
func IsWriteVerb(v string) bool { return slices.Contains(writeVerbs, v) }

// FromSpan reads the write an audit event span records; ok is false for any other span (an
// object or link span, a Kubernetes Event, a read).
func FromSpan(sp *aggregator.Span) (Change, bool) {
	if sp.Kind != aggregator.KindEvent || sp.Source != "audit" {
		return Change{}, false
	}
	verb, _ := sp.Attributes.Get(aggregator.AttrVerb)
	if !IsWriteVerb(verb) {
		return Change{}, false
	}
	c := Change{Time: sp.Start, End: sp.End, Object: sp.Object, Verb: verb, Title: sp.Name,
		TraceID: sp.TraceID, SpanID: sp.SpanID, Window: sp.Window}
	for _, a := range sp.Attributes {
		switch a.Key {
		case aggregator.AttrUser:
			c.User = a.Value
		case aggregator.AttrImpersonator:
			c.Impersonator = a.Value
		case aggregator.AttrUserAgent:
			c.UserAgent = a.Value
		case aggregator.AttrSubresource:
			c.Subresource = a.Value
		case aggregator.AttrStatusCode:
			c.Code, _ = strconv.Atoi(a.Value)
		case aggregator.AttrAuditID:
			c.AuditID = a.Value
		}
	}
	if c.Code == 0 && sp.Error {
		c.Code = 500
	}
	for i := range sp.Logs {
		l := &sp.Logs[i]
		if l.Type != aggregator.LogTypeDiff {
			continue
		}
		c.Diff = append(c.Diff, l.Message)
		p, ok := l.Attributes.Get(diff.AttrPath)
		if !ok || bookkeeping(p) || slices.Contains(c.Paths, p) {
			continue
		}
		c.Paths = append(c.Paths, p)
	}
	return c, true
}

// bookkeeping reports whether a path is one the API server maintains on every write.
func bookkeeping(p string) bool {
	return p == "metadata.resourceVersion" || p == "metadata.generation" || strings.HasPrefix(p, "metadata.managedFields")
}

// Failed reports whether the write failed (a response code of 300 or more).
func (c *Change) Failed() bool { return c.Code >= 300 }

// User kinds.
const (
	KindPerson     = "person"
	KindController = "controller"
	KindNode       = "node"
)

// personClients are the user-agent products of clients people drive.
var personClients = []string{"kubectl", "kubectl.exe", "oc", "helm", "k9s", "kustomize", "kubie", "Lens", "Mozilla", "curl"}

// UserKind says who made the write: a node (system:node:*), a person (a user that is not a
// system: one, through a client people drive: kubectl, helm, a browser, ...), or a controller
// (everything else: service accounts, system components, automation).
func (c *Change) UserKind() string { return UserKind(c.User, c.UserAgent) }

// UserKind is Change.UserKind for a user and user agent.
func UserKind(user, agent string) string {
	switch {
	case strings.HasPrefix(user, "system:node:"):
		return KindNode
	case strings.HasPrefix(user, "system:"):
		return KindController
	}
	product, _, _ := strings.Cut(agent, "/")
	product, _, _ = strings.Cut(product, " ")
	if slices.Contains(personClients, product) {
		return KindPerson
	}
	return KindController
}

// encodingVersion is the first byte of an encoded Change.
const encodingVersion = 1

// errCorrupt is wrapped by Decode's errors.
var errCorrupt = errors.New("corrupt change record")

// Append appends the encoding of c to b: what a store keeps per write, keyed by time and span ID
// (which the encoding leaves out: Decode takes them from the key).
func Append(b []byte, c *Change) []byte {
	b = append(b, encodingVersion)
	b = binary.AppendVarint(b, c.End.Sub(c.Time).Nanoseconds())
	b = binary.AppendVarint(b, c.Window.UnixNano())
	b = append(b, c.TraceID[:]...)
	b = binary.AppendUvarint(b, uint64(c.Code))
	for _, s := range [...]string{c.Object.Cluster, c.Object.Group, c.Object.Version, c.Object.Resource, c.Object.Namespace,
		c.Object.Name, c.Object.UID, c.User, c.Impersonator, c.UserAgent, c.Verb, c.Subresource, c.Title, c.AuditID} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Paths)))
	for _, p := range c.Paths {
		b = appendString(b, p)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Decode reads a Change that Append encoded; t and sid are its time and span ID.
func Decode(v []byte, t time.Time, sid trace.SpanID) (Change, error) {
	d := decoder{b: v}
	if d.byte() != encodingVersion {
		return Change{}, fmt.Errorf("%w: unknown version", errCorrupt)
	}
	c := Change{Time: t, SpanID: sid}
	c.End = t.Add(time.Duration(d.varint()))
	c.Window = time.Unix(0, d.varint()).UTC()
	copy(c.TraceID[:], d.bytes(len(c.TraceID)))
	c.Code = int(d.uvarint())
	for _, s := range [...]*string{&c.Object.Cluster, &c.Object.Group, &c.Object.Version, &c.Object.Resource, &c.Object.Namespace,
		&c.Object.Name, &c.Object.UID, &c.User, &c.Impersonator, &c.UserAgent, &c.Verb, &c.Subresource, &c.Title, &c.AuditID} {
		*s = d.string()
	}
	n := d.uvarint()
	if n > uint64(len(v)) {
		return Change{}, errCorrupt
	}
	for range n {
		c.Paths = append(c.Paths, d.string())
	}
	if d.err || d.off != len(v) {
		return Change{}, errCorrupt
	}
	return c, nil
}

// DecodeMatching is Decode for the changes q selects: the encoded fields q filters on are read in
// place and compared first, so that an entry q does not select costs no allocation; it returns
// ErrSkip for those (Collect skips them).
func DecodeMatching(v []byte, t time.Time, sid trace.SpanID, q *Query) (Change, error) {
	if !matchEncoded(v, q) {
		return Change{}, ErrSkip
	}
	return Decode(v, t, sid)
}

// matchEncoded reports whether the change Append encoded in v may be one q selects; true when v
// cannot be read (Decode then says why).
func matchEncoded(v []byte, q *Query) bool {
	d := decoder{b: v}
	if d.byte() != encodingVersion {
		return true
	}
	d.varint()
	d.varint()
	d.bytes(len(trace.TraceID{}))
	code := int(d.uvarint())
	var f [12][]byte // cluster, group, version, resource, namespace, name, uid, user, impersonator, agent, verb, subresource
	for i := range f {
		f[i] = d.bytes(int(d.uvarint()))
	}
	if d.err {
		return true
	}
	eq := func(b []byte, s string) bool { return s == "" || string(b) == s }
	switch {
	case !eq(f[0], q.Cluster), !eq(f[1], q.Group), !eq(f[3], q.Resource), !eq(f[4], q.Namespace), !eq(f[5], q.Name),
		q.User != "" && string(f[7]) != q.User && string(f[8]) != q.User,
		len(q.Verbs) > 0 && !slices.Contains(q.Verbs, string(f[10])),
		q.Outcome == OutcomeOK && code >= 300,
		q.Outcome == OutcomeFailed && code < 300:
		return false
	}
	if len(q.UserKinds) > 0 {
		kind := UserKind(unsafe.String(unsafe.SliceData(f[7]), len(f[7])), unsafe.String(unsafe.SliceData(f[9]), len(f[9])))
		if !slices.Contains(q.UserKinds, kind) {
			return false
		}
	}
	return true
}

type decoder struct {
	b   []byte
	off int
	err bool
}

func (d *decoder) byte() byte {
	if d.off >= len(d.b) {
		d.err = true
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[min(d.off, len(d.b)):])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[min(d.off, len(d.b)):])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err || n < 0 || d.off+n > len(d.b) {
		d.err = true
		return nil
	}
	d.off += n
	return d.b[d.off-n : d.off]
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	return string(d.bytes(int(n)))
}
