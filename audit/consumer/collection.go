package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/kube"
)

// Attributes of deletes and collection deletes.
const (
	// attrLabelSelector and attrFieldSelector are a deletecollection's selectors, from its
	// request URI.
	attrLabelSelector = "kelemetry.audit.label_selector"
	attrFieldSelector = "kelemetry.audit.field_selector"
	// attrPropagationPolicy is a delete's or deletecollection's DeleteOptions.propagationPolicy
	// (Orphan when it sets only the deprecated orphanDependents), from its request body, when it
	// is not the default, Background (which kubectl sends explicitly).
	attrPropagationPolicy = "kelemetry.audit.propagation_policy"
	// attrCollectionSize is how many objects the deletecollection deleted or marked for
	// deletion (its response's items, or the deletions the informers saw).
	attrCollectionSize = "kelemetry.audit.collection_size"
	// attrDeletion says what a write did to the object's existence: deletionDeleted,
	// deletionMarked or deletionCompleted.
	attrDeletion = "kelemetry.audit.deletion"
	// attrFinalizers lists the finalizers an object marked for deletion waits for
	// (comma-separated).
	attrFinalizers = "kelemetry.audit.finalizers"
)

// Values of attrDeletion.
const (
	// deletionDeleted: the collection delete removed the object.
	deletionDeleted = "deleted"
	// deletionMarked: the delete set deletionTimestamp; the object stays until its finalizers
	// are removed (or its grace period ends).
	deletionMarked = "marked"
	// deletionCompleted: the write removed the last finalizer of an object marked for
	// deletion, which the API server then removed.
	deletionCompleted = "completed"
)

// linkClassNamespaceDeletion is the class of the links between a namespace and the objects the
// namespace controller deleted when the namespace was deleted (the object's parent is the
// namespace).
const linkClassNamespaceDeletion = "namespace deletion"

// namespaceControllerUser is the user kube-controller-manager's namespace controller writes as
// (with --use-service-account-credentials, the default of kubeadm and most distributions).
const namespaceControllerUser = "system:serviceaccount:kube-system:namespace-controller"

// maxCollectionDeletions bounds the objects a body-less collection delete is joined with.
const maxCollectionDeletions = 10_000

// isNamespaceController reports whether the namespace controller made the request: by its
// user, or by its user agent when kube-controller-manager writes with its own credentials
// ("kube-controller-manager/<version> ... /namespace-controller").
func isNamespaceController(ev *auditv1.Event) bool {
	if ev.User.Username == namespaceControllerUser {
		return true
	}
	return strings.HasPrefix(ev.UserAgent, "kube-controller-manager/") &&
		(strings.HasSuffix(ev.UserAgent, "/namespace-controller") || strings.HasSuffix(ev.UserAgent, "/"+namespaceControllerUser))
}

// namespaceLink links an object the namespace controller deleted to its namespace.
func namespaceLink(cluster, ns string) aggregator.Link {
	return aggregator.Link{
		Target: aggregator.ObjectRef{Cluster: cluster, Version: "v1", Resource: "namespaces", Name: ns},
		Role:   aggregator.RoleParent,
		Class:  linkClassNamespaceDeletion,
	}
}

// selectors returns the labelSelector and fieldSelector of a request URI ("" when absent or
// malformed).
func selectors(requestURI string) (label, field string) {
	_, query, ok := strings.Cut(requestURI, "?")
	if !ok {
		return "", ""
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", ""
	}
	return values.Get("labelSelector"), values.Get("fieldSelector")
}

// deletionState notes what a successful write whose response is the object (meta) did to the
// object's existence: a collection delete deleted it or marked it for deletion (finalizers, a
// grace period); a delete marked it (finalizers, e.g. a foreground deletion); an update or
// patch of an object marked for deletion that leaves it without finalizers removed it (the API
// server deletes such an object as part of the write).
func (c *converter) deletionState(ev *auditv1.Event, out *aggregator.Event, meta auditv1.BodyMeta, isObject bool) {
	if !isObject {
		return
	}
	switch ev.Verb {
	case "delete", "deletecollection":
		finalizers := meta.Finalizers
		var marked bool
		if ev.Verb == "delete" {
			// A delete answers with the object after the delete: still there (deletionTimestamp
			// set) while finalizers remain. Its graceful termination (a Pod's) is left as is:
			// the object's own trace shows its end.
			marked = meta.DeletionTimestamp != "" && len(finalizers) > 0
		} else {
			// A collection delete answers with the objects as listed before it deleted them
			// (kube-apiserver's DeleteCollection returns its list), so an item's finalizers are
			// those the delete waits for; a Foreground delete adds foregroundDeletion to each;
			// an item already marked (a repeated collection delete) is still being removed.
			if auditv1.PropagationPolicy(ev.RequestObject) == "Foreground" && !slices.Contains(finalizers, foregroundFinalizer) {
				finalizers = append(slices.Clip(finalizers), foregroundFinalizer)
			}
			marked = len(finalizers) > 0 || (meta.DeletionTimestamp != "" && meta.GracePeriod > 0)
		}
		if !marked {
			if ev.Verb == "deletecollection" {
				out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionDeleted})
			}
			return
		}
		out.Title += " (marked for deletion)"
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionMarked})
		msg := "marked for deletion: "
		if len(finalizers) > 0 {
			fin := strings.Join(finalizers, ",")
			out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrFinalizers, Value: fin})
			msg += "waiting for finalizers " + fin
		} else {
			msg += "graceful termination, " + (time.Duration(meta.GracePeriod) * time.Second).String()
		}
		out.Logs = append(out.Logs, aggregator.Log{Time: out.End, Type: aggregator.LogTypeMessage, Message: msg})
	case "update", "patch":
		if ev.ObjectRef.Subresource == "" && meta.DeletionTimestamp != "" && len(meta.Finalizers) == 0 && meta.GracePeriod <= 0 {
			out.Title += " (deleted: last finalizer removed)"
			out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionCompleted})
		}
	}
}

// namespaceConditionLogs describes the conditions that hold (status True) in a namespace's
// status, as the namespace controller reports what holds its deletion up
// (NamespaceContentRemaining, NamespaceFinalizersRemaining, NamespaceDeletionContentFailure,
// ...): one message log each.
func namespaceConditionLogs(body []byte, at time.Time) []aggregator.Log {
	var ns struct {
		Status struct {
			Conditions []struct {
				Type    string `json:"type"`
				Status  string `json:"status"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &ns); err != nil {
		return nil
	}
	var logs []aggregator.Log
	for _, cond := range ns.Status.Conditions {
		if cond.Status == "True" {
			logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeMessage,
				Message: joinNonEmpty(cond.Type, cond.Reason, cond.Message)})
		}
	}
	return logs
}

// collectionBase is the event a collection delete puts on each object, before the object is
// known: its Object names only the resource and namespace. ok is false when nothing can be
// placed (a failed request, bad timestamps).
func (c *converter) collectionBase(cluster string, ev *auditv1.Event) (*aggregator.Event, outcome, error) {
	ref := ev.ObjectRef
	base, oc, err := c.event(ev, aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: cluster, Group: ref.APIGroup,
		Version: ref.APIVersion, Resource: ref.Resource, Namespace: ref.Namespace}})
	if base == nil {
		return nil, oc, err
	}
	if base.Error {
		// A failed collection delete deleted nothing: no object to place it on.
		return nil, outcomeFilteredDeleteCollection, nil
	}
	return base, outcomeSent, nil
}

// forObject copies base for one object.
func forObject(base *aggregator.Event, obj aggregator.Object, extra int) *aggregator.Event {
	out := *base
	out.Object = obj
	out.Attributes = slices.Grow(slices.Clone(base.Attributes), extra+4)
	out.Logs = slices.Clone(base.Logs)
	out.Links = slices.Clone(base.Links)
	return &out
}

// collectionItem is one object of a collection delete's response.
type collectionItem struct {
	out  *aggregator.Event
	body []byte
	meta auditv1.BodyMeta
}

// collectionItems turns the response of a collection delete, when it is a list, into one event
// per object in it (each item is the object as kube-apiserver listed it just before deleting it:
// its last state, and its finalizers are what the delete waits for). isList is
// false when the response is not a list (Metadata-level auditing: no response).
func (c *converter) collectionItems(ev *auditv1.Event, base *aggregator.Event) (items []collectionItem, isList bool) {
	ref := ev.ObjectRef
	raw, listKind, listAPIVersion := auditv1.ListItems(ev.ResponseObject)
	if raw == nil {
		return nil, false
	}
	itemKind, _ := strings.CutSuffix(listKind, "List")
	for _, item := range raw {
		meta, err := auditv1.DecodeBodyMeta(item)
		if err != nil || meta.Name == "" {
			continue
		}
		if !meta.SeenKind && !meta.SeenAPIVersion {
			item = withTypeMeta(item, itemKind, listAPIVersion)
			meta.Kind, meta.APIVersion = itemKind, listAPIVersion
		}
		if meta.Kind != "" && !kube.IsObjectKind(meta.Kind) {
			continue
		}
		group, _, found := strings.Cut(meta.APIVersion, "/")
		if !found {
			group = ""
		}
		if meta.APIVersion != "" && group != ref.APIGroup {
			continue
		}
		ns := meta.Namespace
		if ns == "" {
			ns = ref.Namespace
		} else if ref.Namespace != "" && ns != ref.Namespace {
			continue
		}
		obj := aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: base.Object.Cluster, Group: ref.APIGroup,
			Version: ref.APIVersion, Resource: ref.Resource, Namespace: ns, Name: meta.Name, UID: meta.UID},
			Body: c.snapshot(ref, item), MetaHash: meta.MetaHash}
		out := forObject(base, obj, 3)
		if meta.ResourceVersion != "" {
			out.Attributes = append(out.Attributes, aggregator.Attr{Key: aggregator.AttrNewRV, Value: meta.ResourceVersion})
		}
		c.deletionState(ev, out, meta, true)
		items = append(items, collectionItem{out: out, body: item, meta: meta})
	}
	size := aggregator.Attr{Key: attrCollectionSize, Value: strconv.Itoa(len(items))}
	for _, it := range items {
		it.out.Attributes = append(it.out.Attributes, size)
	}
	return items, true
}

// withTypeMeta prefixes a list item (the API server leaves out the items' kind and apiVersion)
// with kind and apiVersion, so that its snapshot reads like the object.
func withTypeMeta(item []byte, kind, apiVersion string) []byte {
	if kind == "" || len(item) < 2 || item[0] != '{' {
		return item
	}
	out := make([]byte, 0, len(item)+len(kind)+len(apiVersion)+32)
	out = append(out, `{"kind":`...)
	out, _ = jsontext.AppendQuote(out, kind)
	out = append(out, `,"apiVersion":`...)
	out, _ = jsontext.AppendQuote(out, apiVersion)
	rest := bytes.TrimLeft(item[1:], " \t\r\n")
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// deletionEvent is the event a body-less collection delete puts on an object whose deletion
// the informers saw.
func (j *informerJoin) deletionEvent(base *aggregator.Event, rec changes.Record, size int) *aggregator.Event {
	obj := aggregator.Object{ObjectRef: aggregator.ObjectRef{Cluster: rec.Key.Cluster, Group: rec.Key.Group,
		Version: base.Object.Version, Resource: rec.Key.Resource, Namespace: rec.Key.Namespace, Name: rec.Key.Name, UID: rec.UID}}
	out := forObject(base, obj, 4)
	j.attach(out, rec)
	if rec.Final {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionDeleted})
	} else {
		out.Title += " (marked for deletion)"
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionMarked})
		// The deletion start's snapshot says what the object waits for.
		if meta, err := auditv1.DecodeBodyMeta(rec.Snapshot); err == nil && len(meta.Finalizers) > 0 {
			fin := strings.Join(meta.Finalizers, ",")
			out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrFinalizers, Value: fin})
			out.Logs = append(out.Logs, aggregator.Log{Time: out.End, Type: aggregator.LogTypeMessage,
				Message: "marked for deletion: waiting for finalizers " + fin})
		}
	}
	out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrCollectionSize, Value: strconv.Itoa(size)})
	return out
}

// handleCollection places a collection delete on every object it deleted: the items of its
// response, or (without one) the deletions the informers saw, joined like the informer diffs.
func (c *Consumer) handleCollection(ctx context.Context, cluster string, ev *auditv1.Event) {
	base, oc, err := c.conv.collectionBase(cluster, ev)
	if base == nil {
		if err != nil {
			c.logger.Debug("drop invalid audit event", "cluster", cluster, "error", err)
		}
		c.counter.Add(int(oc), 1)
		return
	}
	if c.repeated(cluster, ev) {
		c.counter.Add(int(outcomeFilteredDuplicate), 1)
		return
	}
	items, isList := c.conv.collectionItems(ev, base)
	if !isList {
		if c.join.holdCollection(ctx, cluster, ev.AuditID, base) {
			return // sent by the join
		}
		c.counter.Add(int(outcomeFilteredDeleteCollection), 1)
		return
	}
	outs := make([]*aggregator.Event, len(items))
	for i, it := range items {
		if c.stream != nil {
			c.stream.observe(ctx, objdiff.Write{Object: it.out.Object.ObjectRef, Verb: ev.Verb, Response: it.body,
				Snapshot: it.out.Object.Body, IsObject: true, ResourceVersion: it.meta.ResourceVersion, Time: it.out.End}, it.out)
		}
		outs[i] = it.out
	}
	c.sendAll(ctx, cluster, ev.AuditID, outs)
}

// sendAll sends the events of one collection delete and counts the audit event once: sent,
// send_error when a send failed, or filtered (deletecollection) when it deleted nothing.
func (c *Consumer) sendAll(ctx context.Context, cluster, auditID string, outs []*aggregator.Event) {
	if len(outs) == 0 {
		c.counter.Add(int(outcomeFilteredDeleteCollection), 1)
		return
	}
	oc := outcomeSent
	for _, out := range outs {
		if err := c.agg.Send(ctx, out); err != nil {
			oc = outcomeSendError
			if ok, suppressed := c.sendWarn.Allow(time.Now()); ok {
				c.logger.Warn("send audit event to the aggregator", "cluster", cluster, "auditID", auditID,
					"object", out.Object.String(), "error", err, "suppressed", suppressed)
			}
		}
	}
	c.counter.Add(int(oc), 1)
}

// foregroundFinalizer is the finalizer a Foreground delete adds: the garbage collector removes it
// once the object's blocking dependents are gone.
const foregroundFinalizer = "foregroundDeletion"
