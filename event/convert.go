package event

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/timecheck"
	"github.com/kelemetry/kelemetry/kube"
)

// sourceName is the aggregator.Event Source of Kubernetes Events.
const sourceName = "event"

// Attribute keys of event spans.
const (
	attrReason              = "kelemetry.event.reason"
	attrType                = "kelemetry.event.type"
	attrAction              = "kelemetry.event.action"
	attrReportingController = "kelemetry.event.reporting_controller"
	attrReportingInstance   = "kelemetry.event.reporting_instance"
	AttrCount               = "kelemetry.event.count"
	attrUID                 = "kelemetry.event.uid"
	attrName                = "kelemetry.event.name" // namespace/name of the Event object
	attrFieldPath           = "kelemetry.event.field_path"
	attrFirstTimestamp      = "kelemetry.event.first_timestamp"
	attrLastTimestamp       = "kelemetry.event.last_timestamp"
	// The related object (core/v1 related, events.k8s.io/v1 related), when there is one.
	attrRelatedGroup     = "kelemetry.event.related.group"
	attrRelatedResource  = "kelemetry.event.related.resource"
	attrRelatedNamespace = "kelemetry.event.related.namespace"
	attrRelatedName      = "kelemetry.event.related.name"
)

// record is a Kubernetes Event in a form common to core/v1 and events.k8s.io/v1.
type record struct {
	UID, Namespace, Name, ResourceVersion string

	Regarding corev1.ObjectReference
	Related   *corev1.ObjectReference

	Reason, Message, Type, Action          string
	ReportingController, ReportingInstance string
	// Count is the number of occurrences (at least 1).
	Count int32
	// First and Last bound the occurrences: eventTime or firstTimestamp, and
	// series.lastObservedTime or lastTimestamp (First when unknown).
	First, Last time.Time

	// firstField and lastField name the fields First and Last come from, for messages.
	firstField, lastField string
}

// namedTime is a timestamp of an Event and its field name.
type namedTime struct {
	field string
	t     time.Time
}

// fromCore reads a core/v1 Event.
func fromCore(e *corev1.Event) *record {
	r := &record{
		UID: string(e.UID), Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion,
		Regarding: e.InvolvedObject, Related: e.Related,
		Reason: e.Reason, Message: e.Message, Type: e.Type, Action: e.Action,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		Count: e.Count,
	}
	var series *eventsv1.EventSeries
	if e.Series != nil {
		series = &eventsv1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	r.complete(e.Source, series, namedTime{"lastTimestamp", e.LastTimestamp.Time},
		namedTime{"eventTime", e.EventTime.Time}, namedTime{"firstTimestamp", e.FirstTimestamp.Time},
		namedTime{"lastTimestamp", e.LastTimestamp.Time}, namedTime{"metadata.creationTimestamp", e.CreationTimestamp.Time})
	return r
}

// fromEventsV1 reads an events.k8s.io/v1 Event.
func fromEventsV1(e *eventsv1.Event) *record {
	r := &record{
		UID: string(e.UID), Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion,
		Regarding: e.Regarding, Related: e.Related,
		Reason: e.Reason, Message: e.Note, Type: e.Type, Action: e.Action,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		Count: e.DeprecatedCount,
	}
	r.complete(e.DeprecatedSource, e.Series, namedTime{"deprecatedLastTimestamp", e.DeprecatedLastTimestamp.Time},
		namedTime{"eventTime", e.EventTime.Time}, namedTime{"deprecatedFirstTimestamp", e.DeprecatedFirstTimestamp.Time},
		namedTime{"deprecatedLastTimestamp", e.DeprecatedLastTimestamp.Time},
		namedTime{"metadata.creationTimestamp", e.CreationTimestamp.Time})
	return r
}

// complete fills what both API versions derive alike: the reporter from the deprecated source,
// the first occurrence (the first non-zero of firsts), the last one and the count (a series wins
// when it is further along).
func (r *record) complete(src corev1.EventSource, series *eventsv1.EventSeries, last namedTime, firsts ...namedTime) {
	if r.ReportingController == "" {
		r.ReportingController = src.Component
	}
	if r.ReportingInstance == "" {
		r.ReportingInstance = src.Host
	}
	first := firstNonZero(firsts...)
	r.First, r.firstField = first.t, first.field
	r.Last, r.lastField = last.t, last.field
	if series != nil {
		r.Count = max(r.Count, series.Count)
		if series.LastObservedTime.After(r.Last) {
			r.Last, r.lastField = series.LastObservedTime.Time, "series.lastObservedTime"
		}
	}
	r.normalize()
}

func (r *record) normalize() {
	if r.Count < 1 {
		r.Count = 1
	}
	if r.Last.Before(r.First) {
		r.Last, r.lastField = r.First, r.firstField
	}
	r.First, r.Last = r.First.UTC(), r.Last.UTC()
}

func firstNonZero(ts ...namedTime) namedTime {
	for _, t := range ts {
		if !t.t.IsZero() {
			return t
		}
	}
	return namedTime{}
}

// maxFutureSkewSetting names the configuration key of the skew in messages.
const maxFutureSkewSetting = "event.maxFutureSkew"

// checkTimes reports, as an error wrapping an *aggregator.TimeError, a first or last occurrence
// that aggregator.CheckTime refuses, naming the field it came from.
func (r *record) checkTimes(now time.Time, maxFutureSkew time.Duration) error {
	for _, f := range [...]namedTime{{r.firstField, r.First}, {r.lastField, r.Last}} {
		if f.t.IsZero() {
			continue
		}
		if err := timecheck.CheckTime(f.t, now, maxFutureSkew); err != nil {
			var te *timecheck.TimeError
			if errors.As(err, &te) {
				err = te.WithSetting(maxFutureSkewSetting)
			}
			field := f.field
			if field == "" {
				field = "timestamp"
			}
			return fmt.Errorf("event %s/%s: %s: %w", r.Namespace, r.Name, field, err)
		}
	}
	return nil
}

// decode reads one Event as JSON, core/v1 or events.k8s.io/v1 (told apart by apiVersion; core
// when absent).
func decode(raw []byte) (*record, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decode event: %w", err)
	}
	switch head.APIVersion {
	case "events.k8s.io/v1":
		var e eventsv1.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("decode events.k8s.io/v1 event: %w", err)
		}
		return fromEventsV1(&e), nil
	case "", "v1":
		var e corev1.Event
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("decode v1 event: %w", err)
		}
		return fromCore(&e), nil
	default:
		return nil, fmt.Errorf("decode event: unsupported apiVersion %q", head.APIVersion)
	}
}

// errNoObject means an Event names no object (no kind or name in involvedObject / regarding), or
// names an object of a kind known to be namespaced without its namespace.
var errNoObject = errors.New("event names no object")

// relatedClass is the link class of an Event's related object: the object the Event is about
// (regarding) gets a link to it, role parent, written as soon as the Event is sent.
const relatedClass = "event.related"

// Converter turns Records into aggregator events.
type Converter struct {
	cluster       string
	mapper        kube.Mapper
	window        time.Duration
	maxFutureSkew time.Duration
}

// NewConverter returns a Converter for Events of cluster; kinds map to resources with mapper
// (nil: kube.NewStaticMapper()); w is the application's trace window length.
func NewConverter(cluster string, mapper kube.Mapper, w aggregator.Window) *Converter {
	if mapper == nil {
		mapper = kube.NewStaticMapper()
	}
	return &Converter{cluster: cluster, mapper: mapper, window: w.Length(), maxFutureSkew: timecheck.DefaultMaxFutureSkew}
}

// withMaxFutureSkew returns a copy of c that refuses Events stamped more than d ahead of this
// receiver's clock (zero: aggregator.DefaultMaxFutureSkew, negative: no limit).
func (c *Converter) withMaxFutureSkew(d time.Duration) *Converter {
	cc := *c
	if d == 0 {
		d = timecheck.DefaultMaxFutureSkew
	}
	cc.maxFutureSkew = d
	return &cc
}

// Window is the trace window length the Converter assumes.
func (c *Converter) Window() time.Duration { return c.window }

// spanStart is where the span of r starts: r.First when it falls in the window of r.Last,
// otherwise r.Last (the span of a later window only covers what is known of that window).
func (c *Converter) spanStart(r *record) time.Time {
	if aggregator.WindowStart(r.First, c.window).Equal(aggregator.WindowStart(r.Last, c.window)) {
		return r.First
	}
	return r.Last
}

// Convert builds the aggregator event of r. start, when not zero, overrides SpanStart (the
// Source passes the earliest occurrence it saw in the window).
//
// An Event whose first or last occurrence (from eventTime, firstTimestamp, lastTimestamp or
// series.lastObservedTime) is outside what the store can represent (years 1678 to 2261) or more than
// the maximum future skew ahead of this receiver's clock is refused with an error that wraps an
// *aggregator.TimeError and names the field; the sources drop and count it
// (kelemetry.event.dropped_events, by reason).
func (c *Converter) Convert(ctx context.Context, r *record, start time.Time) (*aggregator.Event, error) {
	if r.Regarding.Kind == "" || r.Regarding.Name == "" {
		return nil, fmt.Errorf("%w: %s/%s", errNoObject, r.Namespace, r.Name)
	}
	if r.UID == "" {
		return nil, fmt.Errorf("%w: event %s/%s has no uid", aggregator.ErrInvalidEvent, r.Namespace, r.Name)
	}
	if r.Last.IsZero() {
		return nil, fmt.Errorf("%w: event %s/%s has no timestamp", aggregator.ErrInvalidEvent, r.Namespace, r.Name)
	}
	if err := r.checkTimes(time.Now(), c.maxFutureSkew); err != nil {
		return nil, err
	}
	ref, err := c.objectRef(ctx, &r.Regarding)
	if err != nil {
		return nil, err
	}
	if start.IsZero() || start.After(r.Last) {
		start = c.spanStart(r)
	}
	window := aggregator.WindowStart(r.Last, c.window)
	ev := &aggregator.Event{
		Object: aggregator.Object{ObjectRef: ref},
		Source: sourceName,
		ID:     r.UID + "/" + strconv.FormatInt(window.Unix(), 10),
		Title:  r.Reason,
		Start:  start,
		End:    r.Last,
		Error:  r.Type == corev1.EventTypeWarning,
	}
	if ev.Title == "" {
		ev.Title = "event"
	}
	attrs := make(aggregator.Attrs, 0, 16)
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, aggregator.Attr{Key: k, Value: v})
		}
	}
	add(attrReason, r.Reason)
	add(attrType, r.Type)
	add(attrAction, r.Action)
	add(attrReportingController, r.ReportingController)
	add(attrReportingInstance, r.ReportingInstance)
	add(AttrCount, strconv.Itoa(int(r.Count)))
	add(attrUID, r.UID)
	add(attrName, r.Namespace+"/"+r.Name)
	add(attrFieldPath, r.Regarding.FieldPath)
	add(attrFirstTimestamp, r.First.Format(time.RFC3339Nano))
	add(attrLastTimestamp, r.Last.Format(time.RFC3339Nano))
	if rel, ok := c.related(ctx, r); ok {
		if rel.Key() != ref.Key() {
			ev.Links = []aggregator.Link{{Target: rel, Role: aggregator.RoleParent, Class: relatedClass}}
		}
		add(attrRelatedGroup, rel.Group)
		add(attrRelatedResource, rel.Resource)
		add(attrRelatedNamespace, rel.Namespace)
		add(attrRelatedName, rel.Name)
	}
	ev.Attributes = attrs
	if r.Message != "" {
		ev.Logs = []aggregator.Log{{Time: r.Last, Type: aggregator.LogTypeMessage, Message: r.Message}}
	}
	return ev, nil
}

// related returns the object r's related field names, if any.
func (c *Converter) related(ctx context.Context, r *record) (aggregator.ObjectRef, bool) {
	if r.Related == nil || r.Related.Kind == "" || r.Related.Name == "" {
		return aggregator.ObjectRef{}, false
	}
	ref, err := c.objectRef(ctx, r.Related)
	return ref, err == nil
}

func (c *Converter) objectRef(ctx context.Context, o *corev1.ObjectReference) (aggregator.ObjectRef, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return aggregator.ObjectRef{}, fmt.Errorf("%w: apiVersion %q: %w", aggregator.ErrInvalidEvent, o.APIVersion, err)
	}
	gvr, namespaced, known, err := kube.ResourceScope(ctx, c.mapper, c.cluster, gv.WithKind(o.Kind))
	if err != nil {
		return aggregator.ObjectRef{}, fmt.Errorf("map %s %s: %w", o.APIVersion, o.Kind, err)
	}
	ns := o.Namespace
	switch {
	case !namespaced:
		ns = ""
	case ns == "" && known:
		// A namespaced object referred to without its namespace, as controllers do with an
		// object they failed to create (the endpoint controller's FailedToCreateEndpoint names
		// the Endpoints it built, which has none; the Event then lives in "default"). Which
		// object it is cannot be told: filing it under an empty namespace would make up an
		// object that does not exist (and a cluster-scoped look-up of it).
		return aggregator.ObjectRef{}, fmt.Errorf("%w: %s %s %q is namespaced but the reference has no namespace",
			errNoObject, o.APIVersion, o.Kind, o.Name)
	}
	// A kind whose scope is only guessed (a custom resource discovery does not know) keeps the
	// namespace the Event gave, none included: a cluster-scoped custom resource has none.
	return aggregator.ObjectRef{
		Cluster: c.cluster, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
		Namespace: ns, Name: o.Name, UID: string(o.UID),
	}, nil
}

// isList reports whether kind names a list.
func isList(kind string) bool { return kind == "List" || strings.HasSuffix(kind, "List") }
