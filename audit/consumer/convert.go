package consumer

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/internal/timecheck"
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
	differ *objdiff.Differ
}

// attrAuditLevel is the audit event's level (Metadata, Request, RequestResponse).
const attrAuditLevel = "kelemetry.audit.level"

func newConverter(cfg Config, differ *objdiff.Differ) converter {
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
	meta     auditv1.BodyMeta
	isObject bool
	// metadataOnly: the response is the object's metadata only (PartialObjectMetadata, what a
	// metadata-only client such as the garbage collector gets): meta is the object's, but the
	// body is not the object (isObject is false).
	metadataOnly bool
	// layout is the Layout of the snapshot (out.Object.Body), when the decoder recorded the
	// body's.
	layout *objdiff.Layout
}

func (c *converter) convert(cluster string, ev *auditv1.Event, info *convertInfo) (*aggregator.Event, outcome, error) {
	if oc, err := c.filter(ev); oc != outcomeSent {
		return nil, oc, err
	}
	ref := auditv1.Ref(ev)
	if auditv1.IsCollectionDelete(ev) {
		return nil, outcomeFilteredDeleteCollection, nil
	}

	// The response body, if it is the object itself (not a Status, Scale, Binding, ...).
	var meta auditv1.BodyMeta
	var layout *objdiff.Layout
	isObject, metadataOnly := false, false
	if len(ev.ResponseObject) > 0 {
		meta, isObject = auditv1.ResponseIsObject(ref, ev)
		if isObject && meta.Kind == partialMetadataKind {
			isObject, metadataOnly = false, true
		}
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
	if isObject || metadataOnly {
		// A create with generateName has no name in its objectRef: the response has it.
		if obj.Name == "" {
			obj.Name = meta.Name
		}
		if obj.Namespace == "" {
			obj.Namespace = meta.Namespace
		}
		if obj.UID == "" {
			obj.UID = meta.UID
		}
	}
	if isObject {
		obj.Body, layout = c.snapshotKnown(ref, ev.ResponseObject, &meta, auditv1.ResponseLayout(ev))
		obj.MetaHash = meta.MetaHash
	}
	if info != nil {
		info.meta, info.isObject, info.metadataOnly, info.layout = meta, isObject, metadataOnly, layout
	}
	if obj.Name == "" {
		return nil, outcomeInvalidNoName, fmt.Errorf("%w: audit event %s (%s %s) names no object",
			aggregator.ErrInvalidEvent, ev.AuditID, ev.Verb, ref.Resource)
	}
	out, oc, err := c.event(ev, obj)
	if out == nil {
		return nil, oc, err
	}
	if (isObject || metadataOnly) && meta.ResourceVersion != "" {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: aggregator.AttrNewRV, Value: meta.ResourceVersion})
	}
	if !out.Error {
		c.deletionState(ev, out, meta, isObject || metadataOnly)
		if isObject && ref.Resource == "namespaces" && ref.APIGroup == "" && ref.Subresource == "status" {
			out.Logs = append(out.Logs, namespaceConditionLogs(ev.ResponseObject, out.End)...)
		}
	}
	return out, outcomeSent, nil
}

// partialMetadataKind is the kind of a metadata-only response (auditv1.ResponseIsObject).
const partialMetadataKind = "PartialObjectMetadata"

// filter reports why ev is not kept (outcomeSent: it is), and an error for invalid events.
func (c *converter) filter(ev *auditv1.Event) (outcome, error) {
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
func (c *converter) snapshot(ref *auditv1.ObjectReference, body []byte) []byte {
	if snap, err := c.differ.Snapshot(diff.Resource{Group: ref.APIGroup, Resource: ref.Resource}, body); err == nil {
		return snap
	}
	return bytes.Clone(body)
}

// snapshotKnown is snapshot of a response body whose metadata decodeBodyMeta read (meta): the
// managedFields it found are cut without scanning the body again. With the body's Layout (lay,
// from the decoder; may be nil) it returns the snapshot's too, or nil.
func (c *converter) snapshotKnown(ref *auditv1.ObjectReference, body []byte, meta *auditv1.BodyMeta, lay *objdiff.Layout) ([]byte, *objdiff.Layout) {
	if !meta.ManagedFieldsKnown {
		return c.snapshot(ref, body), nil
	}
	snap, snapLay, err := c.differ.SnapshotKnownLayout(diff.Resource{Group: ref.APIGroup, Resource: ref.Resource}, body, meta.ManagedFields, lay)
	if err != nil {
		return bytes.Clone(body), nil
	}
	return snap, snapLay
}

// event builds the event of ev on obj: times, title, user, outcome and request attributes.
func (c *converter) event(ev *auditv1.Event, obj aggregator.Object) (*aggregator.Event, outcome, error) {
	ref := ev.ObjectRef
	start, end := ev.RequestReceivedTimestamp, ev.StageTimestamp
	// The receivers (webhook, log files) drop these already, with the future skew too; this is
	// for events enqueued by other code: never store one at a wrong time.
	if p, ok := timecheck.CheckEventTime(ev, time.Time{}, -1); !ok {
		return nil, outcomeInvalidTimestamp, fmt.Errorf("%w: audit event %s: %w", aggregator.ErrInvalidEvent, ev.AuditID, p.Err)
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
		policy = auditv1.PropagationPolicy(ev.RequestObject)
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
	if ev.Level != "" {
		// The audit policy's level: a write at Metadata level has no bodies, so no diff from
		// the event itself (the UI says why its changes are unknown).
		attrs = append(attrs, aggregator.Attr{Key: attrAuditLevel, Value: ev.Level})
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
		attrs = append(attrs, aggregator.Attr{Key: attrLabelSelector, Value: labelSel})
	}
	if fieldSel != "" {
		attrs = append(attrs, aggregator.Attr{Key: attrFieldSelector, Value: fieldSel})
	}
	if policy != "" && policy != "Background" {
		attrs = append(attrs, aggregator.Attr{Key: attrPropagationPolicy, Value: policy})
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
func errorLogs(st *auditv1.Status, code int, at time.Time) []aggregator.Log {
	if st == nil {
		return []aggregator.Log{{Time: at, Type: aggregator.LogTypeError, Message: statusText(code)}}
	}
	reason := st.Reason
	if reason == "" {
		reason = statusText(code)
	}
	var causes []auditv1.StatusCause
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
