package aggregator

import (
	"encoding/json"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// ObjectRef identifies one Kubernetes object in one cluster. Version and UID are informative: the
// trace identity (see Key) leaves them out, so an object keeps its trace across API versions.
type ObjectRef struct {
	Cluster   string `json:"cluster"`
	Group     string `json:"group"`
	Version   string `json:"version,omitempty"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Key returns the identity of the object's traces.
func (r ObjectRef) Key() ObjectKey {
	return ObjectKey{Cluster: r.Cluster, Group: r.Group, Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// String renders the reference as its key.
func (r ObjectRef) String() string { return r.Key().String() }

// ObjectKey is the part of an ObjectRef that names an object's traces.
type ObjectKey struct {
	Cluster   string `json:"cluster"`
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String renders the key as cluster/group/resource/namespace/name, empty parts kept.
func (k ObjectKey) String() string {
	var b strings.Builder
	b.Grow(len(k.Cluster) + len(k.Group) + len(k.Resource) + len(k.Namespace) + len(k.Name) + 4)
	b.WriteString(k.Cluster)
	b.WriteByte('/')
	b.WriteString(k.Group)
	b.WriteByte('/')
	b.WriteString(k.Resource)
	b.WriteByte('/')
	b.WriteString(k.Namespace)
	b.WriteByte('/')
	b.WriteString(k.Name)
	return b.String()
}

// Object is an object reference plus, when the source had it, the object's JSON body.
type Object struct {
	ObjectRef
	// Body is the object as JSON, or nil when the source did not see it. Linkers that need the
	// body and find it nil fetch it themselves (see kube.ObjectCache).
	Body json.RawMessage `json:"-"`
	// MetaHash fingerprints the parts of Body that relations are usually made of (labels,
	// annotations, owner references); 0 means unknown. Linkers run on an object's first event
	// in a window, again on its first event with a body, and again whenever MetaHash changes,
	// so an owner or annotation added later in the window is still linked.
	MetaHash uint64 `json:"-"`
}

// Attr is one span or log attribute.
type Attr struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Attrs is an ordered attribute list.
type Attrs []Attr

// Get returns the value of key and whether it is present.
func (a Attrs) Get(key string) (string, bool) {
	for _, kv := range a {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return "", false
}

// Log is a timestamped record on a span (an OpenTelemetry span event).
type Log struct {
	Time       time.Time `json:"time"`
	Type       string    `json:"type"`
	Message    string    `json:"message"`
	Attributes Attrs     `json:"attributes,omitempty"`
}

// Log types the built-in sources write.
const (
	LogTypeError    = "error"    // the request failed: status reason and message
	LogTypeCause    = "cause"    // one cause of a failure
	LogTypeMessage  = "message"  // a human-readable message (Kubernetes Event message)
	LogTypeDiff     = "diff"     // a field diff
	LogTypeSnapshot = "snapshot" // an object snapshot
	LogTypeInternal = "kelemetry"
)

// Event is what a source hands to the Aggregator: one thing that happened to one object.
type Event struct {
	Object Object
	// Source names the producer, e.g. "audit" or "event"; it becomes the span's service name.
	Source string
	// ID identifies the source record (audit ID + stage, Event UID + resourceVersion). The same
	// Source, ID and object give the same span ID, so replaying input is idempotent. Required.
	ID         string
	Title      string
	Start, End time.Time
	Attributes Attrs
	Logs       []Log
	// Error marks a failed request or a Warning Event.
	Error bool
	// Links are relations the source itself knows (an Event's related object, ...). Send writes
	// them as link spans in both traces right away, like a Linker's results; the linked object's
	// own linkers run when it is new in the window.
	Links []Link
}

// SpanKind says what a span stands for.
type SpanKind string

// Span kinds.
const (
	KindObject SpanKind = "object" // root of one object's trace in one window
	KindLink   SpanKind = "link"   // pointer from one object's trace to a related object
	KindEvent  SpanKind = "event"  // one event (audit request, Kubernetes Event, ...)
	// KindRequest is one step of the work behind an event span, under it: kube-apiserver's own
	// spans of the request an audit event records (its handler, admission webhooks, etcd).
	KindRequest SpanKind = "request"
)

// Role says how a linked object relates to the object that holds the link span.
type Role string

// Link roles, seen from the object that holds the link span.
const (
	RoleParent Role = "parent" // the linked object is my parent (e.g. my controlling owner)
	RoleChild  Role = "child"  // the linked object is my child
)

// reverse swaps parent and child.
func (r Role) reverse() Role {
	switch r {
	case RoleParent:
		return RoleChild
	case RoleChild:
		return RoleParent
	default:
		return r
	}
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleParent || r == RoleChild }

// Link is a relation found by a Linker.
type Link struct {
	Target ObjectRef `json:"target"`
	Role   Role      `json:"role"`
	// Class groups links in the UI, e.g. "children" or "volumes". May be empty.
	Class string `json:"class,omitempty"`
}

// Span is one finished span as the aggregator hands it to sinks.
type Span struct {
	TraceID  trace.TraceID `json:"traceID"`
	SpanID   trace.SpanID  `json:"spanID"`
	ParentID trace.SpanID  `json:"parentID"`
	Kind     SpanKind      `json:"kind"`
	// Source is the service name: "object", "link", or the event's source.
	Source string `json:"source"`
	Name   string `json:"name"`
	// Object is the object whose trace holds this span.
	Object ObjectRef `json:"object"`
	// Window is the start of the trace's time window.
	Window     time.Time `json:"window"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Attributes Attrs     `json:"attributes,omitempty"`
	Logs       []Log     `json:"logs,omitempty"`
	// Link is set on link spans.
	Link  *Link `json:"link,omitempty"`
	Error bool  `json:"error,omitempty"`
}

// ApproxBytes estimates the memory the span holds: its strings, counted once, and a fixed
// overhead per span, attribute, log and link. Queues and caches bound themselves with it.
func (s *Span) ApproxBytes() int64 {
	n := 256 + len(s.Name) + len(s.Source)
	o := &s.Object
	n += len(o.Cluster) + len(o.Group) + len(o.Version) + len(o.Resource) + len(o.Namespace) + len(o.Name) + len(o.UID)
	for _, a := range s.Attributes {
		n += 32 + len(a.Key) + len(a.Value)
	}
	for i := range s.Logs {
		l := &s.Logs[i]
		n += 64 + len(l.Type) + len(l.Message)
		for _, a := range l.Attributes {
			n += 32 + len(a.Key) + len(a.Value)
		}
	}
	if s.Link != nil {
		t := &s.Link.Target
		n += 128 + len(t.Cluster) + len(t.Group) + len(t.Resource) + len(t.Namespace) + len(t.Name) + len(s.Link.Class)
	}
	return int64(n)
}
