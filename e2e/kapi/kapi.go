// Package kapi reads Kelemetry's HTTP API (GET /api/objects, GET /api/stored-traces/{id},
// GET /healthz) for the end-to-end tests. It declares its own types for the JSON: the API's
// wire format is what the tests check.
package kapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Span kinds (tag kelemetry.span.kind), link roles (tag kelemetry.link.role) and span sources (the
// service name of a span's process).
const (
	KindObject = "object"
	KindLink   = "link"
	KindEvent  = "event"
	RoleParent = "parent"
	RoleChild  = "child"
	// SourceAudit is the source of audit event spans, SourceEvent that of Kubernetes Event spans.
	SourceAudit = "audit"
	SourceEvent = "event"
)

// Tag keys the tests read.
const (
	TagSpanKind      = "kelemetry.span.kind"
	TagLinkRole      = "kelemetry.link.role"
	TagLinkGroup     = "kelemetry.link.group"
	TagLinkResource  = "kelemetry.link.resource"
	TagLinkNamespace = "kelemetry.link.namespace"
	TagLinkName      = "kelemetry.link.name"
	TagUser          = "user.name"
	TagVerb          = "kelemetry.audit.verb"
	TagSubresource   = "kelemetry.audit.subresource"
	TagStatusCode    = "http.response.status_code"
	// Tags of Kubernetes Event spans.
	TagEventUID   = "kelemetry.event.uid"
	TagEventCount = "kelemetry.event.count"
	TagEventName  = "kelemetry.event.name" // namespace/name of the Event
)

// Client talks to one Kelemetry API (e.g. http://127.0.0.1:16686).
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// New returns a client of the API at baseURL.
func New(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Object is one entry of GET /api/objects.
type Object struct {
	Cluster   string   `json:"cluster"`
	Group     string   `json:"group"`
	Version   string   `json:"version"`
	Resource  string   `json:"resource"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	UID       string   `json:"uid"`
	Windows   []Window `json:"windows"`
}

// Window is one stored trace of an object.
type Window struct {
	Start   time.Time `json:"start"`
	TraceID string    `json:"traceID"`
}

// Trace is a stored trace in Jaeger's JSON shape.
type Trace struct {
	TraceID string `json:"traceID"`
	Spans   []Span `json:"spans"`
	// Processes are keyed by process ID; there is one per span source.
	Processes map[string]Process `json:"processes"`
}

// Process is a Jaeger process: Kelemetry makes one per span source.
type Process struct {
	ServiceName string `json:"serviceName"`
}

// Source is the source of a span of t (the service name of its process).
func (t Trace) Source(s Span) string { return t.Processes[s.ProcessID].ServiceName }

// Span is a Jaeger JSON span.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`
	Logs          []Log       `json:"logs"`
}

// Log is a Jaeger span log; Kelemetry's carry the fields "event" (the log type) and "message".
type Log struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []KeyValue `json:"fields"`
}

// Messages returns the message field of the span's logs of type "message" (the message of a
// Kubernetes Event).
func (s Span) Messages() []string { return s.LogMessages("message") }

// LogMessages returns the message field of the span's logs of one type (their field "event":
// "message", "diff", ...).
func (s Span) LogMessages(typ string) []string {
	var out []string
	for _, l := range s.Logs {
		var t, msg string
		for _, f := range l.Fields {
			switch f.Key {
			case "event":
				t = fmt.Sprint(f.Value)
			case "message":
				msg = fmt.Sprint(f.Value)
			}
		}
		if t == typ {
			out = append(out, msg)
		}
	}
	return out
}

// Reference points at a parent span.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Tag returns the value of a tag as a string ("" when absent).
func (s Span) Tag(key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			if v, ok := kv.Value.(string); ok {
				return v
			}
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// Kind is the span's kelemetry.span.kind.
func (s Span) Kind() string { return s.Tag(TagSpanKind) }

// Health is GET /healthz.
type Health struct {
	Status     string `json:"status"`
	QueueDepth int    `json:"queueDepth"`
	// LinkJobs counts the link jobs queued or running.
	LinkJobs int `json:"linkJobs"`
	Replay   struct {
		Done bool `json:"done"`
	} `json:"replay"`
	// Queue is the NATS audit queue's connection ("nats: connected"); empty with the other
	// queues.
	Queue string `json:"queue"`
}

// Query selects objects; empty fields match anything.
type Query struct {
	Cluster, Group, Resource, Namespace, Name string
	// Limit bounds the number of objects (0: the API's default, 100).
	Limit int
}

func (q Query) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"cluster": q.Cluster, "group": q.Group, "resource": q.Resource, "namespace": q.Namespace, "name": q.Name} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

func (q Query) String() string {
	return strings.TrimPrefix(fmt.Sprintf("%s/%s %s/%s@%s", q.Group, q.Resource, q.Namespace, q.Name, q.Cluster), "/")
}

// Objects calls GET /api/objects.
func (c *Client) Objects(ctx context.Context, q Query) ([]Object, error) {
	var resp struct {
		Objects []Object `json:"objects"`
	}
	if err := c.get(ctx, "/api/objects?"+q.values().Encode(), &resp); err != nil {
		return nil, err
	}
	return resp.Objects, nil
}

// StoredTrace calls GET /api/stored-traces/{id}.
func (c *Client) StoredTrace(ctx context.Context, traceID string) (Trace, error) {
	var resp struct {
		Data []Trace `json:"data"`
	}
	if err := c.get(ctx, "/api/stored-traces/"+url.PathEscape(traceID), &resp); err != nil {
		return Trace{}, err
	}
	if len(resp.Data) != 1 {
		return Trace{}, fmt.Errorf("stored trace %s: %d traces in the answer", traceID, len(resp.Data))
	}
	return resp.Data[0], nil
}

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.get(ctx, "/healthz", &h)
	return h, err
}

// ObjectTraces is every stored trace of one object, one per window, oldest first.
type ObjectTraces struct {
	Object Object
	Traces []Trace
}

// ObjectTraces finds exactly one object matching q and fetches the trace of each of its windows.
func (c *Client) ObjectTraces(ctx context.Context, q Query) (ObjectTraces, error) {
	objs, err := c.Objects(ctx, q)
	if err != nil {
		return ObjectTraces{}, err
	}
	if len(objs) != 1 {
		return ObjectTraces{}, fmt.Errorf("%d objects match %s, want 1", len(objs), q)
	}
	out := ObjectTraces{Object: objs[0]}
	windows := slices.Clone(objs[0].Windows)
	slices.SortFunc(windows, func(a, b Window) int { return a.Start.Compare(b.Start) })
	for _, w := range windows {
		tr, err := c.StoredTrace(ctx, w.TraceID)
		if err != nil {
			return ObjectTraces{}, err
		}
		out.Traces = append(out.Traces, tr)
	}
	return out, nil
}

// Spans returns the spans of every window of the given kind ("" for all).
func (o ObjectTraces) Spans(kind string) []Span {
	var out []Span
	for _, tr := range o.Traces {
		for _, s := range tr.Spans {
			if kind == "" || s.Kind() == kind {
				out = append(out, s)
			}
		}
	}
	return out
}

// SourceSpans returns the spans of every window written by one source (SourceEvent: the spans
// of Kubernetes Events), in start order.
func (o ObjectTraces) SourceSpans(source string) []Span {
	var out []Span
	for _, tr := range o.Traces {
		for _, s := range tr.Spans {
			if tr.Source(s) == source {
				out = append(out, s)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Span) int { return cmp.Compare(a.StartTime, b.StartTime) })
	return out
}

// Target is the object a link span points at.
type Target struct {
	Group, Resource, Namespace, Name string
}

func (t Target) String() string {
	res := t.Resource
	if t.Group != "" {
		res += "." + t.Group
	}
	if t.Namespace != "" {
		return res + "/" + t.Namespace + "/" + t.Name
	}
	return res + "/" + t.Name
}

// Links returns the distinct targets of the link spans with the given role, over every window.
func (o ObjectTraces) Links(role string) []Target {
	seen := map[Target]bool{}
	var out []Target
	for _, s := range o.Spans(KindLink) {
		if s.Tag(TagLinkRole) != role {
			continue
		}
		t := Target{Group: s.Tag(TagLinkGroup), Resource: s.Tag(TagLinkResource), Namespace: s.Tag(TagLinkNamespace), Name: s.Tag(TagLinkName)}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Target) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// LinksTo returns the names of the linked objects of one resource with the given role.
func (o ObjectTraces) LinksTo(role, resource string) []string {
	var out []string
	for _, t := range o.Links(role) {
		if t.Resource == resource {
			out = append(out, t.Name)
		}
	}
	return out
}

// Event is an audit event span, summarised.
type Event struct {
	User, Verb, Subresource, Title string
}

// Events returns the audit event spans over every window, in start order (not those of
// Kubernetes Events: see SourceSpans).
func (o ObjectTraces) Events() []Event {
	var out []Event
	for _, s := range o.SourceSpans(SourceAudit) {
		if s.Kind() == KindEvent {
			out = append(out, Event{User: s.Tag(TagUser), Verb: s.Tag(TagVerb), Subresource: s.Tag(TagSubresource), Title: s.OperationName})
		}
	}
	return out
}

// HasEvent reports whether some event matches user, verb and subresource ("*" matches anything).
func (o ObjectTraces) HasEvent(user, verb, subresource string) bool {
	for _, e := range o.Events() {
		if match(user, e.User) && match(verb, e.Verb) && match(subresource, e.Subresource) {
			return true
		}
	}
	return false
}

func match(pattern, s string) bool { return pattern == "*" || pattern == s }

func (c *Client) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
