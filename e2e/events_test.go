package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kelemetry/kelemetry/e2e/kapi"
)

// Helpers comparing the Kubernetes Events of the cluster, listed through client-go, with the
// event spans Kelemetry stored for them (source "event").

// listEvents lists the core/v1 Events of a namespace that keep matches (nil: all).
func listEvents(ctx context.Context, ns string, keep func(e *corev1.Event) bool) ([]corev1.Event, error) {
	l, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the Events of %s: %w", ns, err)
	}
	var out []corev1.Event
	for _, e := range l.Items {
		if keep == nil || keep(&e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// regarding keeps the Events about one object with one reason ("" for any).
func regarding(kind, name, reason string) func(e *corev1.Event) bool {
	return func(e *corev1.Event) bool {
		return e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason)
	}
}

// occurrences is what an Event says about its occurrences, read independently of Kelemetry: the
// number (series or count, at least 1), the first (eventTime or firstTimestamp) and the last
// (series.lastObservedTime or lastTimestamp, the first when unknown).
func occurrences(e *corev1.Event) (count int32, first, last time.Time) {
	count = max(e.Count, 1)
	for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time, e.LastTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			first = t
			break
		}
	}
	last = e.LastTimestamp.Time
	if s := e.Series; s != nil {
		count = max(count, s.Count)
		if s.LastObservedTime.After(last) {
			last = s.LastObservedTime.Time
		}
	}
	if last.Before(first) {
		last = first
	}
	return count, first, last
}

// eventSpan is a stored span of a Kubernetes Event, with where it was found.
type eventSpan struct {
	kapi.Span
	Object kapi.Object
	// Window is the start of the window of the trace holding the span.
	Window time.Time
}

// eventSpans returns the spans of Kubernetes Events in the stored traces of o.
func eventSpans(o kapi.ObjectTraces) []eventSpan {
	windows := map[string]time.Time{}
	for _, w := range o.Object.Windows {
		windows[w.TraceID] = w.Start
	}
	var out []eventSpan
	for _, tr := range o.Traces {
		for _, s := range tr.Spans {
			if tr.Source(s) == kapi.SourceEvent && s.Kind() == kapi.KindEvent {
				out = append(out, eventSpan{Span: s, Object: o.Object, Window: windows[tr.TraceID]})
			}
		}
	}
	return out
}

// namespaceEventSpans returns the spans of Kubernetes Events stored for every object of a
// namespace, through GET /api/objects and GET /api/stored-traces.
func namespaceEventSpans(ctx context.Context, ns string) ([]eventSpan, error) {
	objs, err := api.Objects(ctx, kapi.Query{Cluster: clusterName, Namespace: ns, Limit: 10000})
	if err != nil {
		return nil, err
	}
	var out []eventSpan
	for _, obj := range objs {
		o := kapi.ObjectTraces{Object: obj}
		for _, w := range obj.Windows {
			tr, err := api.StoredTrace(ctx, w.TraceID)
			if err != nil {
				return nil, err
			}
			o.Traces = append(o.Traces, tr)
		}
		out = append(out, eventSpans(o)...)
	}
	return out, nil
}

// matchEvents checks that the spans are exactly the Events: each Event has one span in each
// window it has spans in (a span ID is the same however often the Event was sent, and distinct
// span IDs for one Event and window are duplicates), and its span of the latest window is on the
// involved object and carries the Event's reason, message, count and last occurrence (its first
// occurrence too unless that is in an earlier window); no span belongs to an Event the cluster
// does not have.
func matchEvents(events []corev1.Event, spans []eventSpan) error {
	byUID := map[string][]eventSpan{}
	for _, s := range spans {
		uid := s.Tag(kapi.TagEventUID)
		byUID[uid] = append(byUID[uid], s)
	}
	var errs []error
	for i := range events {
		e := &events[i]
		what := fmt.Sprintf("Event %s (%s on %s/%s, %q)", e.Name, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		got := byUID[string(e.UID)]
		delete(byUID, string(e.UID))
		if len(got) == 0 {
			errs = append(errs, fmt.Errorf("%s: no span", what))
			continue
		}
		perWindow := map[time.Time][]string{}
		for _, s := range got {
			if !slices.Contains(perWindow[s.Window], s.SpanID) {
				perWindow[s.Window] = append(perWindow[s.Window], s.SpanID)
			}
		}
		for w, ids := range perWindow {
			if len(ids) > 1 {
				errs = append(errs, fmt.Errorf("%s: %d spans in the window of %s: %v", what, len(ids), w.Format(time.RFC3339), ids))
			}
		}
		latest := slices.MaxFunc(got, func(a, b eventSpan) int { return a.Window.Compare(b.Window) })
		if err := sameOccurrence(e, latest); err != nil {
			errs = append(errs, fmt.Errorf("%s: span %s: %w", what, latest.SpanID, err))
		}
	}
	for uid, ss := range byUID {
		errs = append(errs, fmt.Errorf("%d spans of Event %s (%s %s) that the cluster does not have", len(ss), uid, ss[0].Tag(kapi.TagEventName), ss[0].OperationName))
	}
	return errors.Join(errs...)
}

// sameOccurrence compares an Event with its span of the latest window.
func sameOccurrence(e *corev1.Event, s eventSpan) error {
	count, first, last := occurrences(e)
	var diffs []string
	diff := func(field string, got, want any) {
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s %v, want %v", field, got, want))
		}
	}
	diff("title", s.OperationName, e.Reason)
	diff("count", s.Tag(kapi.TagEventCount), strconv.Itoa(int(count)))
	diff("messages", strings.Join(s.Messages(), "|"), e.Message)
	diff("object", s.Object.Resource+"/"+s.Object.Namespace+"/"+s.Object.Name,
		strings.ToLower(e.InvolvedObject.Kind)+"s/"+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name)
	diff("end", micros(s.StartTime+s.Duration), micros(last.UnixMicro()))
	if !first.Before(s.Window) {
		diff("start", micros(s.StartTime), micros(first.UnixMicro()))
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// micros renders Unix microseconds (Jaeger's span times) as a time.
func micros(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }

// reasons counts Events by reason, for logs.
func reasons(events []corev1.Event) map[string]int {
	out := map[string]int{}
	for _, e := range events {
		out[e.Reason]++
	}
	return out
}
