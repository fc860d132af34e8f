package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/internal/instrument"
)

// The change feed's route of UIAPI:
//
//	GET /api/changes?cluster=&namespace=&group=&resource=&name=&user=&userKind=&verb=&outcome=
//	                &since=&until=&limit=&cursor=&diff=1      a changesResponse, newest first
//	GET /api/changes?...&follow=1                             a live tail (text/event-stream)
//
// Lists (userKind, verb) are comma-separated or repeated. since is a duration back from now
// (15m, the default) or a time (RFC 3339 or Unix microseconds), until a time (default: none).
// The store must have a change feed (changefeed.Source: the embedded, memory and Jaeger stores).
func (a *UIAPI) registerChanges(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/changes", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") == "1" || r.URL.Query().Get("follow") == "true" {
			a.follow(w, r)
			return
		}
		a.heavy(a.changes)(w, r)
	})
}

// changeEntry is one change of GET /api/changes.
type changeEntry struct {
	Time         time.Time   `json:"time"`
	End          time.Time   `json:"end"`
	Object       changeObj   `json:"object"`
	User         string      `json:"user"`
	Impersonator string      `json:"impersonator,omitempty"`
	UserKind     string      `json:"userKind"`
	UserAgent    string      `json:"userAgent,omitempty"`
	Verb         string      `json:"verb"`
	Subresource  string      `json:"subresource,omitempty"`
	Code         int         `json:"code"`
	Outcome      string      `json:"outcome"`
	Title        string      `json:"title"`
	AuditID      string      `json:"auditID,omitempty"`
	Paths        []string    `json:"paths"`
	Diff         []string    `json:"diff,omitempty"`
	TraceID      string      `json:"traceID"`
	SpanID       string      `json:"spanID"`
	Links        changeLinks `json:"links"`
}

type changeObj struct {
	Cluster   string `json:"cluster"`
	Group     string `json:"group"`
	Version   string `json:"version,omitempty"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// changeLinks point at the object's trace page around the change and at the object as it was
// just after it.
type changeLinks struct {
	Trace    string `json:"trace"`
	ObjectAt string `json:"objectAt"`
}

// changesResponse is the answer of GET /api/changes.
type changesResponse struct {
	Data  []changeEntry `json:"data"`
	Limit int           `json:"limit"`
	// Next continues the listing (cursor=) when More.
	Next string `json:"next,omitempty"`
	More bool   `json:"more"`
	// ScanCut says the store stopped reading its index before the page was full: Next goes on.
	ScanCut bool          `json:"scanCut,omitempty"`
	Scanned int           `json:"scanned"`
	Errors  []JaegerError `json:"errors"`
}

// parseChangeQuery reads GET /api/changes's parameters.
func parseChangeQuery(v url.Values, now time.Time) (changefeed.Query, error) {
	list := func(k string) []string {
		var out []string
		for _, s := range v[k] {
			for _, x := range strings.Split(s, ",") {
				if x = strings.TrimSpace(x); x != "" {
					out = append(out, x)
				}
			}
		}
		return out
	}
	q := changefeed.Query{Cluster: v.Get("cluster"), Namespace: v.Get("namespace"), Group: v.Get("group"),
		Resource: v.Get("resource"), Name: v.Get("name"), User: v.Get("user"), UserKinds: list("userKind"),
		Verbs: list("verb"), Outcome: v.Get("outcome")}
	var errs []error
	since := v.Get("since")
	if since == "" {
		since = "15m"
	}
	if d, err := time.ParseDuration(since); err == nil {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("since %q: want a positive duration or a time", since))
		}
		q.From = now.Add(-d)
	} else if t, err := parseTime(since); err == nil {
		q.From = t
	} else {
		errs = append(errs, fmt.Errorf("since %q: want a duration (15m) or a time (RFC 3339 or Unix microseconds)", since))
	}
	if u := v.Get("until"); u != "" {
		t, err := parseTime(u)
		if err != nil {
			errs = append(errs, fmt.Errorf("until %q: want a time (RFC 3339 or Unix microseconds)", u))
		}
		q.To = t
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("limit %q: want 1 to %d", l, changefeed.MaxLimit))
		}
		q.Limit = n
	}
	c, err := changefeed.ParseCursor(v.Get("cursor"))
	if err != nil {
		errs = append(errs, err)
	}
	q.Before = c
	if err := errors.Join(errs...); err != nil {
		return q, err
	}
	return q, q.Validate()
}

// changeFeed is the reader's change feed, or nil.
func (a *UIAPI) changeFeed() *changefeed.Feed {
	if s, ok := a.reader.(changefeed.Source); ok {
		return s.ChangeFeed()
	}
	return nil
}

// changeRequest reads a request of GET /api/changes: the store's feed and the query; false means
// an error answer was written.
func (a *UIAPI) changeRequest(w http.ResponseWriter, r *http.Request) (*changefeed.Feed, changefeed.Query, bool) {
	feed := a.changeFeed()
	if feed == nil {
		jaegerError(w, http.StatusNotImplemented, "this store keeps no change feed (the embedded, memory and Jaeger stores do)")
		return nil, changefeed.Query{}, false
	}
	q, err := parseChangeQuery(r.URL.Query(), a.now())
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return nil, changefeed.Query{}, false
	}
	return feed, q, true
}

// changes answers GET /api/changes.
func (a *UIAPI) changes(w http.ResponseWriter, r *http.Request) {
	feed, q, ok := a.changeRequest(w, r)
	if !ok {
		return
	}
	page, err := feed.Find(r.Context(), q)
	if err != nil {
		a.internalError(w, "find changes", err)
		return
	}
	withDiff := r.URL.Query().Get("diff") == "1" || r.URL.Query().Get("diff") == "true"
	diffs := a.diffsOf(r.Context(), page.Changes, withDiff)
	resp := changesResponse{Data: make([]changeEntry, 0, len(page.Changes)), Limit: q.WithDefaults().Limit,
		Next: page.Next.String(), More: !page.Next.IsZero(), ScanCut: page.ScanCut, Scanned: page.Scanned}
	for i := range page.Changes {
		resp.Data = append(resp.Data, a.changeEntry(&page.Changes[i], diffs))
	}
	if page.ScanCut {
		a.truncated(r.Context())
	}
	writeJSON(w, http.StatusOK, resp)
}

// diffsOf reads the diff lines of changes from their event spans (one trace read per trace),
// when asked.
func (a *UIAPI) diffsOf(ctx context.Context, cs []changefeed.Change, want bool) map[trace.SpanID][]string {
	if !want || len(cs) == 0 {
		return nil
	}
	out := map[trace.SpanID][]string{}
	read := map[trace.TraceID]bool{}
	for i := range cs {
		if read[cs[i].TraceID] {
			continue
		}
		read[cs[i].TraceID] = true
		spans, err := a.reader.GetTrace(ctx, cs[i].TraceID)
		if err != nil {
			continue // the change is listed without its diff
		}
		for _, sp := range spans {
			for _, l := range sp.Logs {
				if l.Type == aggregator.LogTypeDiff {
					out[sp.SpanID] = append(out[sp.SpanID], strings.Split(strings.TrimRight(l.Message, "\n"), "\n")...)
				}
			}
		}
	}
	return out
}

// changeEntry renders c.
func (a *UIAPI) changeEntry(c *changefeed.Change, diffs map[trace.SpanID][]string) changeEntry {
	o := c.Object
	outcome := changefeed.OutcomeOK
	if c.Failed() {
		outcome = changefeed.OutcomeFailed
	}
	paths := c.Paths
	if paths == nil {
		paths = []string{}
	}
	seg := func(s string) string {
		if s == "" {
			return "-"
		}
		return url.PathEscape(s)
	}
	trace := url.Values{"cluster": {o.Cluster}, "group": {o.Group}, "resource": {o.Resource}, "namespace": {o.Namespace},
		"name": {o.Name}, "time": {c.Time.UTC().Format(time.RFC3339Nano)}}
	return changeEntry{
		Time: c.Time.UTC(), End: c.End.UTC(),
		Object: changeObj{Cluster: o.Cluster, Group: o.Group, Version: o.Version, Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, UID: o.UID},
		User:   c.User, Impersonator: c.Impersonator, UserKind: c.UserKind(), UserAgent: c.UserAgent,
		Verb: c.Verb, Subresource: c.Subresource, Code: c.Code, Outcome: outcome, Title: c.Title, AuditID: c.AuditID,
		Paths: paths, Diff: diffs[c.SpanID], TraceID: jaegerTraceID(c.TraceID), SpanID: c.SpanID.String(),
		Links: changeLinks{
			Trace: "/redirect?" + trace.Encode(),
			ObjectAt: fmt.Sprintf("/api/objects/%s/%s/%s/%s/%s/at?time=%s", seg(o.Cluster), seg(o.Group), seg(o.Resource),
				seg(o.Namespace), seg(o.Name), url.QueryEscape(c.End.UTC().Format(time.RFC3339Nano))),
		},
	}
}

// followKeepalive is how often a quiet live tail sends a comment, so that proxies keep it open.
const followKeepalive = 15 * time.Second

// follow answers GET /api/changes?follow=1: the changes since `since` that match, oldest
// first, then each matching change as it is stored, as server-sent events ("change", data one
// changeEntry). A tail that falls changefeed.DefaultFollowBuffer changes behind is cut off with
// an "error" event and counted; it never slows ingest. At most changefeed.DefaultMaxFollowers
// tails are open at once (429 beyond).
func (a *UIAPI) follow(w http.ResponseWriter, r *http.Request) {
	feed, q, ok := a.changeRequest(w, r)
	if !ok {
		return
	}
	// Subscribe first, then read the backlog: a change stored meanwhile is in both and sent once.
	sub, err := feed.Follow(q)
	if errors.Is(err, changefeed.ErrTooManyFollowers) {
		w.Header().Set("Retry-After", "10")
		jaegerError(w, http.StatusTooManyRequests, "%v (at most %d)", err, changefeed.DefaultMaxFollowers)
		return
	}
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	defer sub.Close()
	a.followers().Add(r.Context(), 1)
	defer a.followers().Add(context.WithoutCancel(r.Context()), -1)

	backlog := q
	backlog.Limit = changefeed.MaxLimit
	page, err := func() (changefeed.Page, error) {
		ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
		defer cancel()
		return feed.Find(ctx, backlog)
	}()
	if err != nil {
		a.internalError(w, "find changes", err)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	withDiff := r.URL.Query().Get("diff") == "1" || r.URL.Query().Get("diff") == "true"
	diffs := a.diffsOf(r.Context(), page.Changes, withDiff)
	sent := map[trace.SpanID]bool{}
	send := func(c *changefeed.Change) bool {
		if sent[c.SpanID] {
			return true
		}
		sent[c.SpanID] = true
		e := a.changeEntry(c, diffs)
		if withDiff && c.Diff != nil {
			e.Diff = c.Diff // a live change carries its diff
		}
		b, _ := json.Marshal(e)
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", b); err != nil {
			return false
		}
		return true
	}
	for i := len(page.Changes) - 1; i >= 0; i-- {
		if !send(&page.Changes[i]) {
			return
		}
	}
	if page.Next.IsZero() {
		_, _ = fmt.Fprint(w, ": backlog complete\n\n")
	} else {
		_, _ = fmt.Fprintf(w, ": backlog cut at %d changes\n\n", len(page.Changes))
	}
	if rc.Flush() != nil {
		return
	}
	keepalive := time.NewTicker(followKeepalive)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case c := <-sub.C:
			if !send(&c) {
				return
			}
			// Send what else is waiting before flushing.
			for more := true; more; {
				select {
				case c := <-sub.C:
					if !send(&c) {
						return
					}
				default:
					more = false
				}
			}
			if len(sent) > 100_000 {
				clear(sent) // the backlog's duplicates are long past
			}
			if rc.Flush() != nil {
				return
			}
		case <-sub.Done:
			if sub.CutOff() {
				a.followCutOff().Add(context.WithoutCancel(r.Context()), 1)
				_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", `{"error":"cut off: this client fell behind the changes being stored; reconnect with since= the last change's time"}`)
				_ = rc.Flush()
			}
			return
		case <-keepalive.C:
			_, _ = fmt.Fprint(w, ": keepalive\n\n")
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// followers and followCutOff are the live tail's metrics.
func (a *UIAPI) followers() metric.Int64UpDownCounter { return a.tail.open }
func (a *UIAPI) followCutOff() metric.Int64Counter    { return a.tail.cutOff }

// tailMetrics count the live tails.
type tailMetrics struct {
	open   metric.Int64UpDownCounter
	cutOff metric.Int64Counter
}

func newTailMetrics(m *instrument.Meter) tailMetrics {
	t := tailMetrics{
		open: m.UpDownCounter("kelemetry.frontend.changes.followers", "Live tails of the change feed open (GET /api/changes?follow=1).", "{client}"),
		cutOff: m.Counter("kelemetry.frontend.changes.follow_cutoff",
			"Live tails of the change feed cut off because the client fell behind the changes being stored.", "{client}", *attribute.EmptySet()),
	}
	t.open.Add(context.Background(), 0) // exported from the start
	return t
}
