package query

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/store"
)

// The object at any moment (NativeAPI):
//
//	GET /api/objects/at?cluster=&group=&resource=&namespace=&name=&time=
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/at?time=
//	GET /api/objects/diff?cluster=&group=&resource=&namespace=&name=&from=&to=
//	GET /api/objects/{cluster}/{group}/{resource}/{namespace}/{name}/diff?from=&to=
//
// In the path form, "-" stands for an empty segment: the core group, a cluster-scoped object's
// namespace. Times are RFC 3339 or Unix milliseconds.

// objectState is the answer of GET /api/objects/at: an object as it was at a moment,
// reconstructed from what the store holds.
type objectState struct {
	Object aggregator.ObjectKey `json:"object"`
	// Time is the moment asked for.
	Time time.Time `json:"time"`
	// Body is the object as JSON: the nearest stored snapshot at or before Time with the stored
	// changes after it applied in order, up to Time. Redacted values stay redaction markers.
	Body json.RawMessage `json:"body"`
	// Source says where Body came from.
	Source stateSource `json:"source"`
	// Gaps are the places where the stored history is incomplete, so Body may differ from the
	// real object: a write whose diff is missing, a resourceVersion jump, a change that could not
	// be applied. Empty when Body is exact (besides Untracked).
	Gaps []stateGap `json:"gaps"`
	// Untracked lists the fields whose value the stored history does not follow (bookkeeping
	// fields the diff ignores); they are left out of Body once a change was applied.
	// metadata.resourceVersion is listed, and left out, when the last write applied did not
	// say it (a write of the scale subresource, whose response is a Scale).
	Untracked []string `json:"untracked"`
	// Unordered lists the keyed lists (items matched by a merge key such as type or name:
	// conditions, containers, ...) that got an item whose place the history does not say: the
	// diff names added items by key, not position, and the item was put at the end. Kubernetes
	// treats these lists as maps; their items are right, their order may not be.
	Unordered []string `json:"unordered"`
}

// stateSource is the origin of a reconstructed object.
type stateSource struct {
	// SnapshotTime is the time of the snapshot the reconstruction starts from; SnapshotKind is
	// "creation" or "deletion" (kelemetry.snapshot.kind), SnapshotRV its resourceVersion.
	SnapshotTime time.Time `json:"snapshotTime"`
	SnapshotKind string    `json:"snapshotKind"`
	SnapshotRV   string    `json:"snapshotResourceVersion,omitempty"`
	// WritesApplied counts the writes (events with diff logs) applied after the snapshot, and
	// ChangesApplied their field changes.
	WritesApplied  int `json:"writesApplied"`
	ChangesApplied int `json:"changesApplied"`
	// LastChange is the time of the last write applied (the snapshot's when none).
	LastChange time.Time `json:"lastChange"`
	// ResourceVersion is the object's resourceVersion after the last write; empty when unknown.
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// stateGap is one hole in an object's stored history.
type stateGap struct {
	// From and To bound the hole: the last known state and the write that revealed it.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Path is the field concerned, when the hole is one field.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// objectDiff is the answer of GET /api/objects/diff: the field changes between the object at
// From and at To, computed from the two reconstructed objects.
type objectDiff struct {
	Object   aggregator.ObjectKey `json:"object"`
	From     time.Time            `json:"from"`
	To       time.Time            `json:"to"`
	Changes  []objdiff.Change     `json:"changes"`
	FromInfo stateSource          `json:"fromSource"`
	ToInfo   stateSource          `json:"toSource"`
	// Gaps are the holes in the history of either reconstruction.
	Gaps      []stateGap `json:"gaps"`
	Untracked []string   `json:"untracked"`
}

// errNoHistory is wrapped by objectAt when the store holds no snapshot of the object at or
// before the time asked for (the time is outside the object's stored history).
var errNoHistory = errors.New("no stored history")

// untrackedFields are the bookkeeping fields the diff ignores besides managedFields (which no
// snapshot holds): their value is only known at a snapshot.
var untrackedFields = []string{"metadata.generation"}

// historyWrite is one event span's diff and snapshot logs.
type historyWrite struct {
	at      time.Time
	start   time.Time
	span    string
	name    string          // the event's name ("alice update")
	snap    *aggregator.Log // a usable snapshot
	logs    []aggregator.Log
	baseRV  string
	newRV   string
	partial bool // a snapshot too large to store
}

// objectAt reconstructs the object key as it was at time at, from the nearest stored snapshot
// at or before it and the stored changes after that snapshot, reading the object's windows
// newest first within Config.MaxSpans. It returns an error wrapping errNoObject when nothing of
// the object is stored up to at, and errNoHistory when no snapshot is.
func objectAt(ctx context.Context, r store.Reader, cfg Config, key aggregator.ObjectKey, at time.Time) (objectState, error) {
	cfg = cfg.WithDefaults()
	st := objectState{Object: key, Time: at.UTC(), Gaps: []stateGap{}, Untracked: slices.Clone(untrackedFields), Unordered: []string{}}
	found, err := r.FindObjects(ctx, store.ObjectQuery{Cluster: key.Cluster, Group: key.Group, Resource: key.Resource,
		Namespace: key.Namespace, Name: key.Name, To: at, Limit: 1, Exact: true})
	if err != nil {
		return st, fmt.Errorf("find object: %w", err)
	}
	if len(found) == 0 || len(found[0].Windows) == 0 {
		return st, fmt.Errorf("%s up to %s: %w", key, at.UTC().Format(time.RFC3339Nano), errNoObject)
	}
	windows := found[0].Windows
	var writes []historyWrite
	spans := 0
	snapAt := -1
	for end := len(windows); end > 0 && snapAt < 0; {
		start := max(end-readChunk, 0)
		traces, err := r.GetTraces(ctx, windows[start:end])
		if err != nil {
			return st, fmt.Errorf("read history: %w", err)
		}
		var chunk []historyWrite
		for _, tr := range traces {
			spans += len(tr)
			for _, sp := range tr {
				if w, ok := writeOf(sp); ok && !w.at.After(at) {
					chunk = append(chunk, w)
				}
			}
		}
		memOK := chargeRead(ctx, traces)
		writes = append(chunk, writes...)
		sortWrites(writes)
		for i := len(writes) - 1; i >= 0; i-- {
			if writes[i].snap != nil {
				snapAt = i
				break
			}
		}
		end = start
		if spans >= cfg.MaxSpans && snapAt < 0 {
			return st, fmt.Errorf("%s: %w: %s", key, ErrBudget, strings.TrimPrefix(spanBudgetMsg(cfg.MaxSpans), truncatedPrefix))
		}
		if !memOK && snapAt < 0 {
			return st, fmt.Errorf("%s: %w: %s", key, ErrBudget, strings.TrimPrefix(ticketOf(ctx).memoryMessage(), truncatedPrefix))
		}
	}
	if snapAt < 0 {
		return st, fmt.Errorf("%s: %w", noSnapshotMsg(key, at, writes), errNoHistory)
	}
	base := writes[snapAt]
	dec := json.NewDecoder(strings.NewReader(base.snap.Message))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return st, fmt.Errorf("snapshot at %s: %w", base.at.UTC().Format(time.RFC3339Nano), err)
	}
	kind, _ := base.snap.Attributes.Get(diff.AttrSnapshotKind)
	rv, _ := base.snap.Attributes.Get(diff.AttrSnapshotRV)
	st.Source = stateSource{SnapshotTime: base.at.UTC(), SnapshotKind: kind, SnapshotRV: rv, LastChange: base.at.UTC(), ResourceVersion: rv}
	last := base.at
	for _, w := range writes[snapAt+1:] {
		gap := func(path, msg string) {
			st.Gaps = append(st.Gaps, stateGap{From: last.UTC(), To: w.at.UTC(), Path: path, Message: msg})
		}
		if w.baseRV != "" && rv != "" && w.baseRV != rv {
			gap("", fmt.Sprintf("no diff stored between resourceVersion %s and %s", rv, w.baseRV))
		}
		if w.partial {
			gap("", "a snapshot too large to store")
		}
		applied := 0
		doc, applied = applyWrite(doc, w, gap, func(path string) {
			if !slices.Contains(st.Unordered, path) {
				st.Unordered = append(st.Unordered, path)
			}
		})
		if applied > 0 {
			st.Source.WritesApplied++
			st.Source.ChangesApplied += applied
			st.Source.LastChange = w.at.UTC()
		}
		switch {
		case w.newRV != "":
			rv = w.newRV
		case applied > 0:
			rv = "" // a write whose response was not the object (a Scale): the version is unknown
		}
		last = w.at
	}
	st.Source.ResourceVersion = rv
	if m, ok := doc.(map[string]any); ok {
		if meta, ok := m["metadata"].(map[string]any); ok {
			if rv != "" {
				meta["resourceVersion"] = rv
			} else if _, had := meta["resourceVersion"]; had {
				delete(meta, "resourceVersion")
				st.Untracked = append(st.Untracked, "metadata.resourceVersion")
			}
			if st.Source.WritesApplied > 0 {
				delete(meta, "generation")
			}
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return st, fmt.Errorf("encode object: %w", err)
	}
	st.Body = body
	return st, nil
}

// noSnapshotMsg says why an object cannot be reconstructed at at: what is missing (a full body
// to start from) and why (only creations and deletions store one).
func noSnapshotMsg(key aggregator.ObjectKey, at time.Time, writes []historyWrite) string {
	msg := fmt.Sprintf("%s: no snapshot stored at or before %s: a full body of an object is stored only at its creation "+
		"(creation snapshot) and deletion (deletion snapshot), and the diffs of other writes need one to start from", key, at.UTC().Format(time.RFC3339Nano))
	if len(writes) == 0 {
		return msg + "; no write of the object with a diff or a snapshot is stored up to then (the time is before its first " +
			"stored write, or its writes were audited at Metadata level without the informer diff)"
	}
	return msg + fmt.Sprintf("; its creation was not recorded (it was created before Kelemetry saw it, or that window is past retention): "+
		"%d stored writes from %s to %s carry diffs only", len(writes), writes[0].at.UTC().Format(time.RFC3339Nano), writes[len(writes)-1].at.UTC().Format(time.RFC3339Nano))
}

// writeOf collects the diff and snapshot logs of an event span.
func writeOf(sp *aggregator.Span) (historyWrite, bool) {
	if sp.Kind != aggregator.KindEvent {
		return historyWrite{}, false
	}
	w := historyWrite{start: sp.Start, span: sp.SpanID.String(), name: sp.Name}
	for i := range sp.Logs {
		l := &sp.Logs[i]
		switch l.Type {
		case aggregator.LogTypeSnapshot:
			w.at = l.Time
			if _, trunc := l.Attributes.Get(diff.AttrTruncated); trunc || !json.Valid([]byte(l.Message)) {
				w.partial = true
				continue
			}
			w.snap = l
		case aggregator.LogTypeDiff:
			w.at = l.Time
			w.logs = append(w.logs, *l)
		}
	}
	if w.snap == nil && len(w.logs) == 0 && !w.partial {
		return historyWrite{}, false
	}
	w.baseRV, _ = sp.Attributes.Get(diff.AttrBaseRV)
	w.newRV, _ = sp.Attributes.Get(aggregator.AttrNewRV)
	if w.snap != nil {
		if rv, ok := w.snap.Attributes.Get(diff.AttrSnapshotRV); ok && rv != "" {
			w.newRV = rv
		}
	}
	return w, true
}

func sortWrites(ws []historyWrite) {
	slices.SortStableFunc(ws, func(a, b historyWrite) int {
		return cmp.Or(a.at.Compare(b.at), a.start.Compare(b.start), strings.Compare(a.span, b.span))
	})
}

// pendingChange is a change of one write, parsed.
type pendingChange struct {
	path  string
	segs  []pathSeg
	op    string
	value any
	order [3]int // depth, phase, position: see applyWrite
}

// applyWrite applies the changes of w to doc and reports the holes through gap. It returns the
// new document and the number of changes applied.
//
// The diff names list items of unkeyed lists by their old index for a removal and their new
// index otherwise, and emits an outer list's changes before its items': the changes of one write
// are applied by depth, and at each depth removals (highest index first), then additions (lowest
// first), then the rest.
func applyWrite(doc any, w historyWrite, gap func(path, msg string), unordered func(path string)) (any, int) {
	var pending []pendingChange
	for _, l := range w.logs {
		op, _ := l.Attributes.Get(diff.AttrOp)
		switch op {
		case diff.OpNone:
			continue
		case diff.OpUnavailable:
			gap("", l.Message)
			continue
		case diff.OpTruncated:
			gap("", "not stored: "+l.Message)
			continue
		case string(objdiff.OpAdd), string(objdiff.OpRemove), string(objdiff.OpReplace):
		default:
			gap("", fmt.Sprintf("unknown diff op %q: %s", op, l.Message))
			continue
		}
		path, _ := l.Attributes.Get(diff.AttrPath)
		segs, err := parsePath(path)
		if err != nil {
			gap(path, err.Error())
			continue
		}
		c := pendingChange{path: path, segs: segs, op: op}
		if op != string(objdiff.OpRemove) {
			raw, ok := l.Attributes.Get(diff.AttrNew)
			if !ok {
				gap(path, "new value too long to store")
				c.value = "<unknown: value too long to store>"
			} else {
				dec := json.NewDecoder(strings.NewReader(raw))
				dec.UseNumber()
				if err := dec.Decode(&c.value); err != nil {
					gap(path, fmt.Sprintf("stored value: %v", err))
					continue
				}
			}
		}
		c.order = [3]int{len(segs), 2, 0}
		if n := len(segs); n > 0 && segs[n-1].kind == segIndex {
			switch op {
			case string(objdiff.OpRemove):
				c.order[1], c.order[2] = 0, -segs[n-1].index
			case string(objdiff.OpAdd):
				c.order[1], c.order[2] = 1, segs[n-1].index
			}
		}
		pending = append(pending, c)
	}
	placeKeyedAdds(pending)
	slices.SortStableFunc(pending, func(a, b pendingChange) int {
		return cmp.Or(cmp.Compare(a.order[0], b.order[0]), cmp.Compare(a.order[1], b.order[1]), cmp.Compare(a.order[2], b.order[2]))
	})
	applied := 0
	for _, c := range pending {
		blind := false
		nd, err := applyOp(doc, c.segs, c.op, c.value, &blind)
		if err != nil {
			gap(c.path, fmt.Sprintf("cannot apply %s: %v", c.op, err))
			continue
		}
		if blind {
			unordered(c.path[:strings.LastIndex(c.path, "["+c.segs[len(c.segs)-1].field+"=")])
		}
		doc = nd
		applied++
	}
	return doc, applied
}

// placeKeyedAdds finds where items added to keyed lists go. The diff does not say; it emits
// the changes of a keyed list in the order of the new list (changed and added items), then the
// removals. So an added item goes before the next item of the same list that the write changed,
// and at the end when there is none (an unchanged item after it cannot be told).
func placeKeyedAdds(pending []pendingChange) {
	for i := range pending {
		c := &pending[i]
		n := len(c.segs)
		if c.op != "add" || n == 0 || c.segs[n-1].kind != segMatch {
			continue
		}
		for _, later := range pending[i+1:] {
			if later.op == "remove" || len(later.segs) < n || !samePrefix(c.segs[:n-1], later.segs) {
				continue
			}
			if s := later.segs[n-1]; s.kind == segMatch && s.field == c.segs[n-1].field && s.value != c.segs[n-1].value {
				c.segs = slices.Clone(c.segs)
				c.segs[n-1].before = &s
				break
			}
		}
	}
}

func samePrefix(prefix, segs []pathSeg) bool {
	for i, s := range prefix {
		if !s.same(segs[i]) {
			return false
		}
	}
	return true
}

// objectDiffBetween reconstructs the object at from and at to (objectAt) and compares them.
func objectDiffBetween(ctx context.Context, r store.Reader, cfg Config, key aggregator.ObjectKey, from, to time.Time) (objectDiff, error) {
	out := objectDiff{Object: key, From: from.UTC(), To: to.UTC(), Changes: []objdiff.Change{}, Gaps: []stateGap{}}
	a, err := objectAt(ctx, r, cfg, key, from)
	if err != nil {
		return out, fmt.Errorf("at from: %w", err)
	}
	b, err := objectAt(ctx, r, cfg, key, to)
	if err != nil {
		return out, fmt.Errorf("at to: %w", err)
	}
	out.FromInfo, out.ToInfo, out.Untracked = a.Source, b.Source, b.Untracked
	for _, g := range b.Gaps {
		if g.To.After(from) || g.To.Equal(from) {
			out.Gaps = append(out.Gaps, g)
		}
	}
	ignore := append(slices.Clone(diff.DefaultIgnore), untrackedFields...)
	changes, err := objdiff.Compare(a.Body, b.Body, diff.Options{Ignore: ignore})
	if err != nil {
		return out, fmt.Errorf("compare: %w", err)
	}
	if changes != nil {
		out.Changes = changes
	}
	return out, nil
}

// objectKeyOf reads the object's key from the path (the path form) or the query.
func objectKeyOf(r *http.Request) (aggregator.ObjectKey, error) {
	q := r.URL.Query()
	k := aggregator.ObjectKey{Cluster: q.Get("cluster"), Group: q.Get("group"), Resource: q.Get("resource"),
		Namespace: q.Get("namespace"), Name: q.Get("name")}
	if r.PathValue("resource") != "" {
		dash := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		k = aggregator.ObjectKey{Cluster: dash(r.PathValue("cluster")), Group: dash(r.PathValue("group")),
			Resource: r.PathValue("resource"), Namespace: dash(r.PathValue("namespace")), Name: r.PathValue("name")}
	}
	if k.Resource == "" || k.Name == "" {
		return k, errors.New("the object's resource and name are required")
	}
	return k, nil
}

// parseMoment reads a time parameter: RFC 3339 or Unix milliseconds.
func parseMoment(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("parameter '%s' is required (RFC 3339 or Unix milliseconds)", name)
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < minQueryTime.UnixMilli() || ms > maxQueryTime.UnixMilli() {
			return time.Time{}, fmt.Errorf("parameter '%s' %q: out of range", name, s)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parameter '%s' %q: want RFC 3339 or Unix milliseconds", name, s)
	}
	return clampTime(t).UTC(), nil
}

// objectError answers a failed reconstruction.
func (a *NativeAPI) objectError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errNoObject), errors.Is(err, errNoHistory):
		jaegerError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, ErrBudget):
		w.Header().Set("Retry-After", a.limiter.retryAfter())
		jaegerError(w, http.StatusServiceUnavailable, "%v", err)
	case a.readError(w, "read object history", err):
	case errors.Is(err, context.Canceled):
	default:
		a.logger.Error("read object history", "error", err)
		jaegerError(w, http.StatusInternalServerError, "read object history: %v", err)
	}
}

func (a *NativeAPI) objectAt(w http.ResponseWriter, r *http.Request) {
	key, err := objectKeyOf(r)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	at, err := parseMoment("time", r.URL.Query().Get("time"))
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	st, err := objectAt(r.Context(), a.reader, a.cfg, key, at)
	if err != nil {
		a.objectError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: st, Total: 1})
}

func (a *NativeAPI) objectDiff(w http.ResponseWriter, r *http.Request) {
	key, err := objectKeyOf(r)
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	q := r.URL.Query()
	from, err := parseMoment("from", q.Get("from"))
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	to, err := parseMoment("to", q.Get("to"))
	if err != nil {
		jaegerError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if to.Before(from) {
		jaegerError(w, http.StatusBadRequest, "'to' is before 'from'")
		return
	}
	d, err := objectDiffBetween(r.Context(), a.reader, a.cfg, key, from, to)
	if err != nil {
		a.objectError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, jaegerResponse{Data: d, Total: len(d.Changes)})
}
