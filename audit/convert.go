package audit

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/kube"
)

// converter turns audit events into aggregator events: it filters them (verbs, stages,
// resources, user agents), names the object, the user and the outcome, and snapshots the
// response body when it is the object. It has no state beyond its configuration.
type converter struct {
	verbs               []string
	stages              []string
	ignoreImpersonation bool
	excludeResources    map[groupResource]struct{}
	excludeUserAgents   []string
	// differ snapshots response bodies: no managedFields, Secrets' data and redacted fields
	// hidden.
	differ *diff.Differ
}

func newConverter(cfg ConsumerConfig, differ *diff.Differ) converter {
	c := converter{
		verbs:               slices.Clone(cfg.Verbs),
		stages:              slices.Clone(cfg.Stages),
		ignoreImpersonation: cfg.IgnoreImpersonation,
		excludeResources:    make(map[groupResource]struct{}, len(cfg.ExcludeResources)),
		excludeUserAgents:   slices.Clone(cfg.ExcludeUserAgents),
		differ:              differ,
	}
	for _, r := range cfg.ExcludeResources {
		gr, _ := parseGroupResource(r) // validated by ConsumerConfig.Validate
		c.excludeResources[gr] = struct{}{}
	}
	return c
}

// convertInfo is what convert learnt about the response, for the diffs.
type convertInfo struct {
	meta     bodyMeta
	isObject bool
	// layout is the Layout of the snapshot (out.Object.Body), when the decoder recorded the
	// body's.
	layout *diff.Layout
}

func (c *converter) convert(cluster string, ev *Event, info *convertInfo) (*aggregator.Event, outcome, error) {
	if oc, err := c.filter(ev); oc != outcomeSent {
		return nil, oc, err
	}
	ref := objectRef(ev)
	if isCollectionDelete(ev) {
		return nil, outcomeFilteredDeleteCollection, nil
	}

	// The response body, if it is the object itself (not a Status, Scale, Binding, ...).
	var meta bodyMeta
	var layout *diff.Layout
	isObject := false
	if len(ev.ResponseObject) > 0 {
		meta, isObject = responseIsObject(ref, ev)
	}
	obj := aggregator.Object{ObjectRef: aggregator.ObjectRef{
		Cluster:   cluster,
		Group:     ref.APIGroup,
		Version:   ref.APIVersion,
		Resource:  ref.Resource,
		Namespace: ref.Namespace,
		Name:      ref.Name,
		UID:       ref.UID,
	}}
	if isObject {
		// A create with generateName has no name in its objectRef: the response has it.
		if obj.Name == "" {
			obj.Name = meta.name
		}
		if obj.Namespace == "" {
			obj.Namespace = meta.namespace
		}
		if obj.UID == "" {
			obj.UID = meta.uid
		}
		obj.Body, layout = c.snapshotKnown(ref, ev.ResponseObject, &meta, responseLayout(ev))
		obj.MetaHash = meta.metaHash
	}
	if info != nil {
		info.meta, info.isObject, info.layout = meta, isObject, layout
	}
	if obj.Name == "" {
		return nil, outcomeInvalidNoName, fmt.Errorf("%w: audit event %s (%s %s) names no object",
			aggregator.ErrInvalidEvent, ev.AuditID, ev.Verb, ref.Resource)
	}
	out, oc, err := c.event(ev, obj)
	if out == nil {
		return nil, oc, err
	}
	if isObject && meta.resourceVersion != "" {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: aggregator.AttrNewRV, Value: meta.resourceVersion})
	}
	if !out.Error {
		c.deletionState(ev, out, meta, isObject)
		if isObject && ref.Resource == "namespaces" && ref.APIGroup == "" && ref.Subresource == "status" {
			out.Logs = append(out.Logs, namespaceConditionLogs(ev.ResponseObject, out.End)...)
		}
	}
	return out, outcomeSent, nil
}

// objectRef is ev's objectRef, but for a namespace without the namespace kube-apiserver audits
// requests on a namespace with (its own name; create has none): a namespace is cluster-scoped,
// and its trace must be one.
func objectRef(ev *Event) *ObjectReference {
	ref := ev.ObjectRef
	if ref.APIGroup == "" && ref.Resource == "namespaces" && ref.Namespace != "" {
		cp := *ref
		cp.Namespace = ""
		return &cp
	}
	return ref
}

// filter reports why ev is not kept (outcomeSent: it is), and an error for invalid events.
func (c *converter) filter(ev *Event) (outcome, error) {
	if ev == nil {
		return outcomeInvalidEvent, fmt.Errorf("%w: nil audit event", aggregator.ErrInvalidEvent)
	}
	if !slices.Contains(c.verbs, ev.Verb) {
		return outcomeFilteredVerb, nil
	}
	if !slices.Contains(c.stages, ev.Stage) {
		return outcomeFilteredStage, nil
	}
	ref := ev.ObjectRef
	if ref == nil {
		return outcomeFilteredNoObjectRef, nil
	}
	if _, ok := c.excludeResources[groupResource{ref.APIGroup, ref.Resource}]; ok {
		return outcomeFilteredResource, nil
	}
	for _, ua := range c.excludeUserAgents {
		if strings.Contains(ev.UserAgent, ua) {
			return outcomeFilteredUserAgent, nil
		}
	}
	if ev.AuditID == "" {
		return outcomeInvalidNoAuditID, fmt.Errorf("%w: audit event without auditID", aggregator.ErrInvalidEvent)
	}
	return outcomeSent, nil
}

// snapshot is the diff snapshot of body, an object of ref's resource: a copy (decoded events
// alias the whole input line or webhook body, request object included, which must not stay in
// memory for as long as the body is kept), without managedFields, Secrets' data and redacted
// fields hidden.
func (c *converter) snapshot(ref *ObjectReference, body []byte) []byte {
	if snap, err := c.differ.Snapshot(diff.Resource{Group: ref.APIGroup, Resource: ref.Resource}, body); err == nil {
		return snap
	}
	return bytes.Clone(body)
}

// snapshotKnown is snapshot of a response body whose metadata decodeBodyMeta read (meta): the
// managedFields it found are cut without scanning the body again. With the body's Layout (lay,
// from the decoder; may be nil) it returns the snapshot's too, or nil.
func (c *converter) snapshotKnown(ref *ObjectReference, body []byte, meta *bodyMeta, lay *diff.Layout) ([]byte, *diff.Layout) {
	if !meta.managedFieldsKnown {
		return c.snapshot(ref, body), nil
	}
	snap, snapLay, err := c.differ.SnapshotKnownLayout(diff.Resource{Group: ref.APIGroup, Resource: ref.Resource}, body, meta.managedFields, lay)
	if err != nil {
		return bytes.Clone(body), nil
	}
	return snap, snapLay
}

// event builds the event of ev on obj: times, title, user, outcome and request attributes.
func (c *converter) event(ev *Event, obj aggregator.Object) (*aggregator.Event, outcome, error) {
	ref := ev.ObjectRef
	start, end := ev.RequestReceivedTimestamp, ev.StageTimestamp
	// The receivers (webhook, log files) drop these already, with the future skew too; this is
	// for events enqueued by other code: never store one at a wrong time.
	if p, ok := checkEventTime(ev, time.Time{}, -1); !ok {
		return nil, outcomeInvalidTimestamp, fmt.Errorf("%w: audit event %s: %w", aggregator.ErrInvalidEvent, ev.AuditID, p.err)
	}
	switch {
	case start.IsZero() && end.IsZero():
		return nil, outcomeInvalidNoTimestamp, fmt.Errorf("%w: audit event %s has no timestamps",
			aggregator.ErrInvalidEvent, ev.AuditID)
	case start.IsZero():
		start = end
	case end.IsZero() || end.Before(start):
		end = start
	}

	code := 0
	if ev.ResponseStatus != nil {
		code = int(ev.ResponseStatus.Code)
	}
	user := ev.User.Username
	impersonator := ""
	if imp := ev.ImpersonatedUser; imp != nil && imp.Username != "" && !c.ignoreImpersonation {
		user, impersonator = imp.Username, ev.User.Username
	}

	var details []string
	var labelSel, fieldSel, policy string
	if ev.Verb == "deletecollection" {
		labelSel, fieldSel = selectors(ev.RequestURI)
		if labelSel != "" {
			details = append(details, "labelSelector="+labelSel)
		}
		if fieldSel != "" {
			details = append(details, "fieldSelector="+fieldSel)
		}
	}
	if ev.Verb == "delete" || ev.Verb == "deletecollection" {
		policy = propagationPolicy(ev.RequestObject)
		// Background is the default (and what kubectl sends): only the others change the story.
		if policy == "Foreground" || policy == "Orphan" {
			details = append(details, "propagationPolicy="+policy)
		}
	}

	out := &aggregator.Event{
		Object: obj,
		Source: SourceName,
		ID:     ev.AuditID + "/" + ev.Stage,
		Title:  title(user, ev.Verb, ref.Subresource, code, details...),
		Start:  start,
		End:    end,
		Error:  code >= 300,
	}

	attrs := make(aggregator.Attrs, 0, 12)
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrAuditID, Value: ev.AuditID})
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrUser, Value: user})
	if impersonator != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrImpersonator, Value: impersonator})
	}
	if ev.UserAgent != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrUserAgent, Value: ev.UserAgent})
	}
	if ev.ResponseStatus != nil {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrStatusCode, Value: strconv.Itoa(code)})
	}
	if len(ev.SourceIPs) > 0 {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrSourceIP, Value: ev.SourceIPs[0]})
		if len(ev.SourceIPs) > 1 {
			attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrProxyIPs, Value: strings.Join(ev.SourceIPs[1:], ",")})
		}
	}
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrVerb, Value: ev.Verb})
	if ref.Subresource != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrSubresource, Value: ref.Subresource})
	}
	if ref.ResourceVersion != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrResourceVersion, Value: ref.ResourceVersion})
	}
	if labelSel != "" {
		attrs = append(attrs, aggregator.Attr{Key: AttrLabelSelector, Value: labelSel})
	}
	if fieldSel != "" {
		attrs = append(attrs, aggregator.Attr{Key: AttrFieldSelector, Value: fieldSel})
	}
	if policy != "" && policy != "Background" {
		attrs = append(attrs, aggregator.Attr{Key: AttrPropagationPolicy, Value: policy})
	}
	out.Attributes = attrs

	if out.Error {
		out.Logs = errorLogs(ev.ResponseStatus, code, end)
	} else if (ev.Verb == "delete" || ev.Verb == "deletecollection") && obj.Namespace != "" && isNamespaceController(ev) {
		out.Links = []aggregator.Link{namespaceLink(obj.Cluster, obj.Namespace)}
	}
	return out, outcomeSent, nil
}

// title is "<user> <verb>[ <subresource>][ <detail>...][ (<status text>)]", the status text only
// for codes of 300 and above; details are a collection delete's selectors and a delete's
// propagation policy.
func title(user, verb, subresource string, code int, details ...string) string {
	if user == "" {
		user = "unknown"
	}
	var b strings.Builder
	b.Grow(len(user) + len(verb) + len(subresource) + 24)
	b.WriteString(user)
	b.WriteByte(' ')
	b.WriteString(verb)
	if subresource != "" {
		b.WriteByte(' ')
		b.WriteString(subresource)
	}
	for _, d := range details {
		b.WriteByte(' ')
		b.WriteString(d)
	}
	if code >= 300 {
		b.WriteString(" (")
		b.WriteString(statusText(code))
		b.WriteByte(')')
	}
	return b.String()
}

func statusText(code int) string {
	if s := http.StatusText(code); s != "" {
		return s
	}
	return strconv.Itoa(code)
}

// errorLogs describes a failed request: its status reason and message, then one log per cause.
func errorLogs(st *Status, code int, at time.Time) []aggregator.Log {
	if st == nil {
		return []aggregator.Log{{Time: at, Type: aggregator.LogTypeError, Message: statusText(code)}}
	}
	reason := st.Reason
	if reason == "" {
		reason = statusText(code)
	}
	var causes []StatusCause
	if st.Details != nil {
		causes = st.Details.Causes
	}
	logs := make([]aggregator.Log, 0, 1+len(causes))
	logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeError, Message: joinNonEmpty(reason, st.Message)})
	for _, cause := range causes {
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeCause,
			Message: joinNonEmpty(cause.Field, cause.Type, cause.Message)})
	}
	return logs
}

func joinNonEmpty(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// responseIsObject decodes the type and metadata of a response body and reports whether the body
// is the object ref names: not a Status, Scale, Binding or other subresource type, in the same API
// group, with the same name and namespace (when ref has them). A subresource response counts only
// for "status", whose requests return the whole object. A delete that returns the object (it has
// finalizers, or the server answers 200 with it) counts too.
func responseIsObject(ref *ObjectReference, ev *Event) (bodyMeta, bool) {
	if ref.Subresource != "" && ref.Subresource != "status" {
		return bodyMeta{}, false
	}
	meta, err := responseMeta(ev)
	if err != nil {
		return bodyMeta{}, false
	}
	if !kube.IsObjectKind(meta.kind) || meta.kind == "" || meta.name == "" {
		return bodyMeta{}, false
	}
	group, _, found := strings.Cut(meta.apiVersion, "/")
	if !found {
		group = "" // core group: "v1"
	}
	if group != ref.APIGroup {
		return bodyMeta{}, false
	}
	if (ref.Name != "" && meta.name != ref.Name) || (ref.Namespace != "" && meta.namespace != ref.Namespace) ||
		(ref.UID != "" && meta.uid != "" && meta.uid != ref.UID) {
		return bodyMeta{}, false
	}
	return meta, true
}

// bodyMeta is the part of an object body the consumer reads.
type bodyMeta struct {
	apiVersion, kind                       string
	name, namespace, uid, resourceVersion  string
	seenAPIVersion, seenKind, seenMetadata bool
	// deletionTimestamp, deletionGracePeriodSeconds and finalizers say whether the object is
	// being deleted and what it waits for.
	deletionTimestamp string
	gracePeriod       int64
	finalizers        []string
	// metaHash fingerprints metadata.labels, annotations and ownerReferences (non-zero once
	// metadata was read): the aggregator runs linkers again when it changes.
	metaHash uint64
	// managedFields is where metadata.managedFields is in the body, for its snapshot; known once
	// metadata, an object, was read whole.
	managedFields      diff.ManagedFields
	managedFieldsKnown bool
}

// metaSeed seeds metaHash; fingerprints are compared within one process only.
var metaSeed = maphash.MakeSeed()

// decodeBodyMeta reads apiVersion, kind and metadata.{name,namespace,uid,resourceVersion} from a
// JSON object, skipping every other member without decoding it, and stops as soon as it has the
// three top-level members (kube-apiserver writes them first, so spec and status are not scanned).
// It scans the body in place with the audit decoder's scanner; the part it scanned must be valid
// UTF-8. A repeated member name is not an error: its last value counts.
func decodeBodyMeta(body []byte) (bodyMeta, error) {
	d := getDecoder(body)
	defer putDecoder(d)
	var m bodyMeta
	if null, err := d.beginObject(); err != nil || null {
		if err == nil {
			err = errNotJSONObject
		}
		return m, err
	}
	if _, err := d.bodyMetaMembers(&m, 0); err != nil {
		return m, err
	}
	if !utf8.Valid(body[:d.pos]) {
		return bodyMeta{}, errNotUTF8
	}
	return m, nil
}

var (
	errNotJSONObject = errors.New("response object is not a JSON object")
	errNotUTF8       = errors.New("response object is not valid UTF-8")
)

// bodyMetaMembers reads the members of an object body whose '{' was read until it has apiVersion,
// kind and metadata (then closed is false), or to its closing '}' (closed is true). base is where
// the body starts in the decoder's data.
func (d *eventDecoder) bodyMetaMembers(m *bodyMeta, base int) (closed bool, err error) {
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return false, err
		}
		if !more {
			return true, nil
		}
		switch string(name) {
		case "apiVersion":
			m.apiVersion, err = d.metaString()
			m.seenAPIVersion = true
		case "kind":
			m.kind, err = d.metaString()
			m.seenKind = true
		case "metadata":
			err = d.bodyMetadata(m, base)
			m.seenMetadata = true
		default:
			err = d.skipValue()
		}
		if err != nil {
			return false, err
		}
		if m.seenAPIVersion && m.seenKind && m.seenMetadata {
			return false, nil
		}
	}
}

// respMeta is what the decoder read of an event's responseObject while it decoded the event, so
// that the consumer does not scan the body again: decodeBodyMeta's result for body, and the
// body's Layout for the diff.
type respMeta struct {
	meta    bodyMeta
	body    []byte // the ResponseObject it describes
	metaEnd int    // how far decodeBodyMeta would have read (its UTF-8 check covers that)
	layout  *diff.Layout
}

// readResponse reads a responseObject like readRaw, and the bodyMeta and Layout of an object
// body into r (r.body is nil when it has none).
func (d *eventDecoder) readResponse(r *respMeta) ([]byte, error) {
	*r = respMeta{}
	if d.ws() != '{' {
		return d.readRaw()
	}
	start := d.pos
	d.lay.Reset()
	d.rec, d.recBase = &d.lay, start
	d.rec.Open(0)
	d.pos++
	closed, err := d.bodyMetaMembers(&r.meta, start)
	metaEnd := d.pos - start
	for first := false; err == nil && !closed; {
		var more bool
		if _, more, err = d.nextMember(first); err == nil && more {
			err = d.skipValue()
		}
		closed = !more
	}
	d.rec = nil
	if err != nil {
		// Read it again as readRaw does, for readRaw's error.
		*r = respMeta{}
		d.pos = start
		return d.readRaw()
	}
	r.body = d.data[start:d.pos:d.pos]
	r.metaEnd = metaEnd
	if d.lay.Finish(len(r.body)) {
		r.layout = d.lay.Clone()
	}
	return r.body, nil
}

// respFor is what the decoder read of ev.ResponseObject, if ev.ResponseObject is still the body
// it read; nil otherwise.
func respFor(ev *Event) *respMeta {
	if r := ev.resp; r != nil && r.body != nil && len(r.body) == len(ev.ResponseObject) &&
		unsafe.SliceData(r.body) == unsafe.SliceData(ev.ResponseObject) {
		return r
	}
	return nil
}

// responseMeta is decodeBodyMeta(ev.ResponseObject), from what the decoder read when it decoded
// ev if ev.ResponseObject is still the body it read.
func responseMeta(ev *Event) (bodyMeta, error) {
	if r := respFor(ev); r != nil {
		if !utf8.Valid(r.body[:r.metaEnd]) {
			return bodyMeta{}, errNotUTF8
		}
		return r.meta, nil
	}
	return decodeBodyMeta(ev.ResponseObject)
}

// responseLayout is the Layout of ev.ResponseObject the decoder recorded, or nil.
func responseLayout(ev *Event) *diff.Layout {
	if r := respFor(ev); r != nil {
		return r.layout
	}
	return nil
}

// bodyMetadata reads the metadata member of an object body into m.
func (d *eventDecoder) bodyMetadata(m *bodyMeta, base int) error {
	if d.ws() != '{' {
		return d.skipValue()
	}
	if d.rec != nil {
		d.rec.Open(d.pos - d.recBase)
	}
	d.pos++
	m.metaHash = 1
	mf := diff.ManagedFields{Absent: true}
	for first := true; ; first = false {
		name, more, err := d.nextMember(first)
		if err != nil {
			return err
		}
		if !more {
			m.managedFields, m.managedFieldsKnown = mf, true
			return nil
		}
		switch string(name) {
		case "managedFields":
			d.ws()
			start := d.pos
			if err = d.skipValue(); err == nil {
				if mf.Absent { // the first one, as Snapshot strips
					mf = diff.ManagedFields{Start: start - base, End: d.pos - base}
				}
			}
		case "labels", "annotations", "ownerReferences":
			h := maphash.Bytes(metaSeed, name)
			var v []byte
			if v, err = d.readRaw(); err == nil {
				if v == nil {
					v = nullValue
				}
				m.metaHash = (m.metaHash*1099511628211^h)*1099511628211 ^ maphash.Bytes(metaSeed, v)
				if m.metaHash == 0 {
					m.metaHash = 1
				}
			}
		case "name":
			m.name, err = d.metaString()
		case "namespace":
			m.namespace, err = d.metaString()
		case "uid":
			m.uid, err = d.metaString()
		case "resourceVersion":
			m.resourceVersion, err = d.metaString()
		case "deletionTimestamp":
			m.deletionTimestamp, err = d.metaString()
		case "deletionGracePeriodSeconds":
			m.gracePeriod, err = d.metaInt()
		case "finalizers":
			m.finalizers, err = d.metaStrings(m.finalizers[:0])
		default:
			err = d.skipValue()
		}
		if err != nil {
			return err
		}
	}
}

// nullValue is the JSON null that readRaw returns as nil.
var nullValue = []byte("null")

// metaString reads a string value; any other value is skipped and reads as "".
func (d *eventDecoder) metaString() (string, error) {
	if d.ws() != '"' {
		return "", d.skipValue()
	}
	b, err := d.readStr()
	return string(b), err
}

// metaInt reads an integer; any other value is skipped and reads as 0 (a fraction or a number
// too large too).
func (d *eventDecoder) metaInt() (int64, error) {
	if c := d.ws(); c != '-' && !isDigit(c) {
		return 0, d.skipValue()
	}
	start := d.pos
	if err := d.scanNumber(); err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(string(d.data[start:d.pos]), 10, 64)
	return n, nil
}

// metaStrings appends the non-empty strings of an array to dst; other values are skipped.
func (d *eventDecoder) metaStrings(dst []string) ([]string, error) {
	if d.ws() != '[' {
		return dst, d.skipValue()
	}
	if d.rec != nil {
		d.rec.Open(d.pos - d.recBase)
	}
	d.pos++
	for first := true; ; first = false {
		more, err := d.nextElement(first)
		if err != nil || !more {
			return dst, err
		}
		s, err := d.metaString()
		if err != nil {
			return dst, err
		}
		if s != "" {
			dst = append(dst, s)
		}
	}
}

// isName reports whether the raw JSON string v (quotes included) is want.
func isName(v jsontext.Value, want string) bool {
	if len(v) == len(want)+2 && string(v[1:len(v)-1]) == want {
		return true
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return false
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return err == nil && string(s) == want
}

// readString reads a string value; any other value is skipped and reads as "".
func readString(d *jsontext.Decoder) (string, error) {
	if d.PeekKind() != '"' {
		return "", d.SkipValue()
	}
	v, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return string(s), err
}
