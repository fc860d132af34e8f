package query

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// A result is drawn in three stages: build turns a Graph into a tree of nodes (objects with
// their events as child spans, which is the tree mode), the mode's steps rewrite that tree, and
// toJaeger serialises it. Every stage is deterministic: children are kept sorted and span IDs
// are derived from object keys and stored span IDs.

type nodeKind uint8

const (
	nodeObject    nodeKind = iota // one object, its windows merged
	nodeEvent                     // one stored event span
	nodeOmitted                   // "N more objects omitted"
	nodeReference                 // a second parent's pointer to an object shown elsewhere
	nodeGroup                     // the events of one source (grouped mode)
	nodeRoot                      // synthetic root over several roots
	nodeRequest                   // one request span under its event (kube-apiserver's own)
)

type node struct {
	id                 trace.SpanID
	sid                string // id as a string (idString), once it is drawn
	kind               nodeKind
	service, operation string
	start, end         time.Time
	tags               []JaegerKeyValue
	logs               []outLog
	warnings           []string
	parent             *node
	children           []*node

	obj   *object          // nodeObject
	ev    *aggregator.Span // nodeEvent
	req   *aggregator.Span // nodeRequest
	ref   *node            // nodeReference: the object referenced
	class string           // nodeObject: the class of the link from its parent
}

type outLog struct {
	time   time.Time
	source string // the event source it was folded from, "" for raw logs
	fields []JaegerKeyValue
}

// step is one transform of a drawn tree.
type step func(root *node) *node

// pipeline is how a display mode draws a graph: whether each event is folded into a log of its
// object span as the tree is built (tracing, grouped), then the steps.
type pipeline struct {
	foldEvents bool
	steps      []step
}

// pipelines are the pipelines of the display modes.
var pipelines = map[displayMode]pipeline{
	DisplayTree:     {steps: []step{nameObjects}},
	displayTimeline: {steps: []step{flatten, nameObjects}},
	displayTracing:  {foldEvents: true, steps: []step{compactDurations, nameObjects}},
	displayGrouped:  {foldEvents: true, steps: []step{groupBySource, compactDurations, nameObjects}},
}

// Render draws g in display mode d as a Jaeger trace with the given trace ID. A truncated graph
// (Graph.Truncated) says so in the trace's warnings, its root's warnings and a span named by the
// message under the root.
func Render(g *Graph, d displayMode, id trace.TraceID) JaegerTrace {
	return renderWithin(g, d, id, nil)
}

// hashID is the 64-bit FNV-1a hash of the parts, each followed by a zero byte (computed inline:
// hash/fnv through its interface costs an allocation per part).
func hashID(parts ...string) trace.SpanID {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h ^= uint64(p[i])
			h *= prime64
		}
		h *= prime64 // the zero byte after the part: h ^= 0
	}
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h)
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// idString is n.id as a string, made once.
func (n *node) idString() string {
	if n.sid == "" {
		n.sid = n.id.String()
	}
	return n.sid
}

func (n *node) add(c *node) {
	c.parent = n
	n.children = append(n.children, c)
}

// build draws g as the tree mode shows it; with foldEvents, each object's events are logs of its
// span (in the order of its events) instead of spans under it: the modes that fold them get them
// without a node per event (8,000 of them in the 1,000-pod tree).
func build(g *Graph, foldEvents bool) *node {
	nodes := make(map[aggregator.ObjectKey]*node, len(g.Objects))
	var refs []*node
	// The object nodes, whose tags (and folded events) are made once the tree is built, in
	// parallel: each node's from its own object.
	objects := make([]*node, 0, len(g.Objects))
	var objectNode func(k aggregator.ObjectKey, class string) *node
	objectNode = func(k aggregator.ObjectKey, class string) *node {
		o := g.Objects[k]
		n := &node{kind: nodeObject, id: hashID("object", k.String()), obj: o, class: class,
			service: "object", operation: o.Ref.Resource + "/" + o.Ref.Name, start: o.Start, end: o.End}
		nodes[k] = n
		objects = append(objects, n)
		if o.Synthetic {
			n.warnings = append(n.warnings, "the object span is not stored in this range: shown from links and events")
		}
		if o.Unread {
			n.warnings = append(n.warnings, "not read: a budget of the request ran out first")
		}
		if !foldEvents {
			for _, ev := range o.Events {
				en := eventNode(ev)
				addRequests(en, o.Requests[ev.SpanID])
				n.add(en)
			}
		}
		for _, e := range g.Children[k] {
			n.add(objectNode(e.Child, e.Class))
		}
		for _, e := range g.References[k] {
			r := &node{kind: nodeReference, id: hashID("reference", k.String(), e.Child.String()),
				service: "kelemetry", operation: "also owns " + e.Child.Resource + "/" + e.Child.Name,
				start: o.Start, end: o.Start}
			r.tags = append(keyTags(e.Child), str("kelemetry.span.kind", "reference"))
			if e.Class != "" {
				r.tags = append(r.tags, str(aggregator.AttrLinkClass, e.Class))
			}
			refs = append(refs, r)
			n.add(r)
			r.ref = &node{obj: g.Objects[e.Child]} // resolved below
		}
		if c := g.Omitted[k]; c > 0 {
			word := "objects"
			if c == 1 {
				word = "object"
			}
			n.add(&node{kind: nodeOmitted, id: hashID("omitted", k.String()), service: "kelemetry",
				operation: strconv.Itoa(c) + " more " + word + " omitted", start: o.Start, end: o.Start,
				tags: []JaegerKeyValue{str("kelemetry.span.kind", "omitted"), {Key: "kelemetry.omitted", Type: "int64", Value: int64(c)}}})
		}
		return n
	}
	var root *node
	if len(g.Roots) == 1 {
		root = objectNode(g.Roots[0], "")
	} else {
		parts := []string{"root"}
		for _, s := range g.Seeds {
			parts = append(parts, s.String())
		}
		root = &node{kind: nodeRoot, id: hashID(parts...), service: "kelemetry",
			operation: strconv.Itoa(len(g.Roots)) + " related objects", start: g.From, end: g.To,
			tags: []JaegerKeyValue{str("kelemetry.span.kind", "root")}}
		for _, k := range g.Roots {
			root.add(objectNode(k, ""))
		}
		if root.start.IsZero() || root.end.IsZero() {
			root.start, root.end = spanOf(root.children)
		}
	}
	for _, r := range refs {
		r.ref = nodes[r.ref.obj.Key]
	}
	inParallel(len(objects), minParallelObjects, func(lo, hi int) {
		for _, n := range objects[lo:hi] {
			o := n.obj
			n.tags = objectTags(o, n.class)
			if !foldEvents {
				continue
			}
			n.logs = make([]outLog, 0, len(o.Events))
			for _, ev := range o.Events {
				l := foldEvent(ev)
				if rs := o.Requests[ev.SpanID]; len(rs) > 0 {
					l.fields = append(l.fields, str(requestField, requestSummary(rs)))
				}
				n.logs = append(n.logs, l)
			}
		}
	})
	return root
}

// minParallelObjects is the least number of objects per goroutine when loader.read fills them,
// or build makes their tags and folds their events, at once.
const minParallelObjects = 256

func spanOf(ns []*node) (start, end time.Time) {
	for _, c := range ns {
		if start.IsZero() || c.start.Before(start) {
			start = c.start
		}
		if c.end.After(end) {
			end = c.end
		}
	}
	return start, end
}

func keyTags(k aggregator.ObjectKey) []JaegerKeyValue {
	return []JaegerKeyValue{
		str("cluster", k.Cluster), str("group", k.Group), str("resource", k.Resource),
		str("namespace", k.Namespace), str("name", k.Name),
	}
}

func objectTags(o *object, class string) []JaegerKeyValue {
	r, k := &o.Ref, &o.Key
	tags := make([]JaegerKeyValue, 0, 13+len(o.Attributes)+2)
	// The key's fields are mostly the reference's: such a value is boxed once for both tags.
	kv := [...]any{k.Cluster, k.Group, k.Resource, k.Namespace, k.Name}
	rv := kv
	for i, v := range [...]string{r.Cluster, r.Group, r.Resource, r.Namespace, r.Name} {
		if v != kv[i] {
			rv[i] = v
		}
	}
	tag := func(key string, v any) JaegerKeyValue { return JaegerKeyValue{Key: key, Type: "string", Value: v} }
	tags = append(tags, tag("cluster", kv[0]), tag("group", kv[1]), tag("resource", kv[2]),
		tag("namespace", kv[3]), tag("name", kv[4]), str("kelemetry.span.kind", "object"),
		tag(aggregator.AttrCluster, rv[0]), tag(aggregator.AttrGroup, rv[1]), tag(aggregator.AttrResource, rv[2]),
		tag(aggregator.AttrNamespace, rv[3]), tag(aggregator.AttrName, rv[4]))
	if r.Version != "" {
		tags = append(tags, str(aggregator.AttrVersion, r.Version))
	}
	if r.UID != "" {
		tags = append(tags, str(aggregator.AttrUID, r.UID))
	}
	for _, a := range o.Attributes {
		tags = append(tags, str(a.Key, a.Value))
	}
	if class != "" {
		tags = append(tags, str(aggregator.AttrLinkClass, class))
	}
	if o.Synthetic {
		tags = append(tags, JaegerKeyValue{Key: "kelemetry.synthetic", Type: "bool", Value: true})
	}
	return tags
}

// eventNode is an event span; its tags and logs are made by spanDetails when it is drawn as a
// span (most modes fold it first).
func eventNode(ev *aggregator.Span) *node {
	return &node{kind: nodeEvent, id: ev.SpanID, ev: ev, service: ev.Source, operation: ev.Name, start: ev.Start, end: ev.End}
}

// spanDetails makes the tags and logs of a node drawn from a stored span (an event, or a request
// span under it): the span's kind, attributes and error, its logs as they are.
func spanDetails(n *node, sp *aggregator.Span) {
	n.tags = append(make([]JaegerKeyValue, 0, len(sp.Attributes)+2), str("kelemetry.span.kind", string(sp.Kind)))
	for _, a := range sp.Attributes {
		n.tags = append(n.tags, str(a.Key, a.Value))
	}
	if sp.Error {
		n.tags = append(n.tags, JaegerKeyValue{Key: "error", Type: "bool", Value: true})
	}
	for _, l := range sp.Logs {
		fields := append(make([]JaegerKeyValue, 0, 2+len(l.Attributes)), str("event", l.Type), str("message", l.Message))
		for _, a := range l.Attributes {
			fields = append(fields, str(a.Key, a.Value))
		}
		n.logs = append(n.logs, outLog{time: l.Time, fields: fields})
	}
}

// walkNodes calls fn on n and its descendants, parents first.
func walkNodes(n *node, fn func(*node)) {
	fn(n)
	for _, c := range n.children {
		walkNodes(c, fn)
	}
}

// Attribute keys copied into a folded event's log, and the field names they get.
var foldedTags = foldedTagsArr[:]

var foldedTagsArr = [...]struct{ from, to string }{
	{aggregator.AttrUser, "user"},
	{aggregator.AttrStatusCode, "responseCode"},
	{aggregator.AttrUserAgent, "userAgent"},
	{aggregator.AttrSourceIP, "sourceIP"},
	{"kelemetry.event.action", "action"},
	{"kelemetry.event.source", "source"},
	{"kelemetry.audit.level", "auditLevel"},
	// A Kubernetes Event's facts, as kubectl events shows them.
	{"kelemetry.event.type", "type"},
	{"kelemetry.event.reason", "reason"},
	{"kelemetry.event.count", "count"},
	{"kelemetry.event.reporting_controller", "reportingController"},
	{"kelemetry.event.first_timestamp", "firstSeen"},
	{"kelemetry.event.last_timestamp", "lastSeen"},
}

// Log types of a folded event's logs and the field names they get.
var foldedLogTypes = map[string]string{
	aggregator.LogTypeError:    "error",
	aggregator.LogTypeCause:    "error",
	aggregator.LogTypeMessage:  "message",
	aggregator.LogTypeSnapshot: "snapshot",
	aggregator.LogTypeInternal: "_debug",
}

// diffClass sorts one diff line ("<path> <old> -> <new>") into a field: "" hides it.
func diffClass(line string) string {
	path, _, _ := strings.Cut(line, " ")
	switch {
	case strings.HasPrefix(path, "metadata.managedFields"):
		return ""
	case path == "metadata.resourceVersion", path == "metadata.generation":
		return "verbose diff"
	}
	return "diff"
}

func foldEvent(ev *aggregator.Span) outLog {
	// The fields are gathered on the stack and copied once into a slice of their number.
	var buf [2 + len(foldedTagsArr) + 3]JaegerKeyValue
	fields := append(buf[:0], str(ev.Source, ev.Name))
	for _, t := range foldedTags {
		if v, ok := ev.Attributes.Get(t.from); ok && v != "" {
			fields = append(fields, str(t.to, v))
		}
	}
	var diffs, verbose, notes lineJoin // the lines of the classes "diff" and "verbose diff", and the notes
	var other []JaegerKeyValue
	for _, l := range ev.Logs {
		if l.Type == aggregator.LogTypeDiff {
			if isDiffNote(l) {
				notes.add(l.Message)
				continue
			}
			classifyDiff(strings.TrimRight(l.Message, "\n"), &diffs, &verbose)
			continue
		}
		name, ok := foldedLogTypes[l.Type]
		if !ok {
			name = l.Type
		}
		other = appendField(other, name, l.Message)
	}
	if diffs.n > 0 {
		fields = append(fields, str("diff", diffs.String()))
	}
	if verbose.n > 0 {
		fields = append(fields, str("verbose diff", verbose.String()))
	}
	if notes.n > 0 {
		fields = append(fields, str("diff note", notes.String()))
	}
	if ev.Error && !hasField(other, "error") {
		other = append(other, JaegerKeyValue{Key: "error", Type: "bool", Value: true})
	}
	out := make([]JaegerKeyValue, 0, len(fields)+len(other))
	return outLog{time: ev.Start, source: ev.Source, fields: append(append(out, fields...), other...)}
}

// isDiffNote reports whether a diff log is a note about the diff (no change, none available, more
// not shown, the request's patch follows) rather than a change: its AttrOp says so.
func isDiffNote(l aggregator.Log) bool {
	switch op, _ := l.Attributes.Get(diff.AttrOp); op {
	case diff.OpNone, diff.OpUnavailable, diff.OpTruncated, objdiff.OpRequestPatch:
		return true
	}
	return false
}

// classifyDiff adds the non-empty lines of a diff log to diffs or verbose by their diffClass
// (dropping the unclassed). A run of consecutive "diff" lines goes in as one piece of msg, so a
// log whose every line is of that class costs no copy.
func classifyDiff(msg string, diffs, verbose *lineJoin) {
	runStart, runEnd := -1, 0
	for pos := 0; pos <= len(msg); {
		end := strings.IndexByte(msg[pos:], '\n')
		if end < 0 {
			end = len(msg)
		} else {
			end += pos
		}
		line := msg[pos:end]
		class := ""
		if line != "" {
			class = diffClass(line)
		}
		if class == "diff" {
			if runStart < 0 {
				runStart = pos
			}
			runEnd = end
		} else {
			if runStart >= 0 {
				diffs.add(msg[runStart:runEnd])
				runStart = -1
			}
			if class == "verbose diff" {
				verbose.add(line)
			}
		}
		pos = end + 1
	}
	if runStart >= 0 {
		diffs.add(msg[runStart:runEnd])
	}
}

// lineJoin joins pieces of text with newlines; it copies only when there are two or more.
type lineJoin struct {
	first string
	buf   []byte
	n     int
}

func (j *lineJoin) add(s string) {
	switch j.n {
	case 0:
		j.first = s
	case 1:
		j.buf = append(append(append(make([]byte, 0, len(j.first)+1+len(s)), j.first...), '\n'), s...)
	default:
		j.buf = append(append(j.buf, '\n'), s...)
	}
	j.n++
}

func (j *lineJoin) String() string {
	if j.n == 1 {
		return j.first
	}
	return string(j.buf)
}

// appendField adds a field, joining the values of a repeated name with newlines.
func appendField(fields []JaegerKeyValue, name, value string) []JaegerKeyValue {
	for i := range fields {
		if fields[i].Key == name {
			fields[i].Value = fields[i].Value.(string) + "\n" + value
			return fields
		}
	}
	return append(fields, str(name, value))
}

func hasField(fields []JaegerKeyValue, name string) bool {
	for _, f := range fields {
		if f.Key == name {
			return true
		}
	}
	return false
}

// groupBySource moves the folded logs of each source into a child span per source (grouped).
func groupBySource(root *node) *node {
	walkNodes(root, func(n *node) {
		if n.kind != nodeObject || len(n.logs) == 0 {
			return
		}
		var sources []string
		bySource := map[string][]outLog{}
		var rest []outLog
		for _, l := range n.logs {
			if l.source == "" {
				rest = append(rest, l)
				continue
			}
			if _, ok := bySource[l.source]; !ok {
				sources = append(sources, l.source)
			}
			bySource[l.source] = append(bySource[l.source], l)
		}
		slices.Sort(sources)
		groups := make([]*node, 0, len(sources))
		for _, s := range sources {
			ls := bySource[s]
			g := &node{kind: nodeGroup, id: hashID("group", n.obj.Key.String(), s), service: s, operation: s,
				start: ls[0].time, end: ls[len(ls)-1].time, logs: ls, parent: n,
				tags: []JaegerKeyValue{str("kelemetry.span.kind", "group")}}
			groups = append(groups, g)
		}
		n.logs = rest
		n.children = append(groups, n.children...)
	})
	return root
}

// compactDurations shrinks object, group and root spans to their content: their logs and
// their children's spans (tracing, grouped). Omitted and reference markers sit at the start.
func compactDurations(root *node) *node {
	var visit func(n *node)
	visit = func(n *node) {
		for _, c := range n.children {
			visit(c)
		}
		if n.kind == nodeEvent || n.kind == nodeOmitted || n.kind == nodeReference || n.kind == nodeRequest {
			return
		}
		var start, end time.Time
		grow := func(s, e time.Time) {
			if start.IsZero() || s.Before(start) {
				start = s
			}
			if e.After(end) {
				end = e
			}
		}
		for _, l := range n.logs {
			grow(l.time, l.time)
		}
		for _, c := range n.children {
			if c.kind != nodeOmitted && c.kind != nodeReference {
				grow(c.start, c.end)
			}
		}
		if !start.IsZero() {
			n.start, n.end = start, end
		}
		for _, c := range n.children {
			if c.kind == nodeOmitted || c.kind == nodeReference {
				c.start, c.end = n.start, n.start
			}
		}
	}
	visit(root)
	return root
}

// flatten puts every event and omission marker directly under the root (timeline).
func flatten(root *node) *node {
	var moved []*node
	for _, c := range root.children {
		walkNodes(c, func(n *node) {
			switch n.kind {
			case nodeEvent:
				if n.ev.Object.Key() != rootKey(root) {
					n.operation = n.ev.Object.Resource + "/" + n.ev.Object.Name + ": " + n.operation
				}
				moved = append(moved, n)
			case nodeOmitted:
				moved = append(moved, n)
			}
		})
	}
	for _, n := range moved {
		// An event keeps its request spans; everything else under it moved too.
		kept := n.children[:0]
		for _, c := range n.children {
			if c.kind == nodeRequest {
				kept = append(kept, c)
			}
		}
		n.children, n.parent = kept, root
	}
	slices.SortStableFunc(moved, func(a, b *node) int {
		return cmp.Or(a.start.Compare(b.start), bytes.Compare(a.id[:], b.id[:])) // as their hex strings
	})
	root.children = moved
	return root
}

func rootKey(root *node) aggregator.ObjectKey {
	if root.obj != nil {
		return root.obj.Key
	}
	return aggregator.ObjectKey{}
}

// nameObjects names object spans as "<cluster> <resource>" (cluster only at the root and where
// it changes) and "<namespace> <name>" (namespace default left out); the root's name ends with
// its time range in UTC.
func nameObjects(root *node) *node {
	var visit func(n *node, cluster string)
	visit = func(n *node, cluster string) {
		if n.kind == nodeObject {
			k := n.obj.Key
			n.service = k.Resource
			if n.parent == nil || k.Cluster != cluster {
				n.service = strings.TrimSpace(k.Cluster + " " + k.Resource)
			}
			n.operation = k.Name
			if k.Namespace != "" && k.Namespace != "default" {
				n.operation = k.Namespace + " " + k.Name
			}
			cluster = k.Cluster
		}
		for _, c := range n.children {
			visit(c, cluster)
		}
	}
	visit(root, "")
	if root.kind == nodeObject || root.kind == nodeRoot {
		root.operation += " / " + root.start.UTC().Format(time.TimeOnly) + ".." + root.end.UTC().Format(time.TimeOnly)
	}
	return root
}

// toJaeger serialises the tree in depth-first order, while the spans fit in b (nil: all).
func toJaeger(tid string, root *node, b *renderBudget) JaegerTrace {
	out := JaegerTrace{TraceID: tid, Spans: []JaegerSpan{}, Processes: map[string]JaegerProcess{}}
	var services []string
	seenSvc := map[string]bool{}
	count := 0
	walkNodes(root, func(n *node) {
		count++
		if !seenSvc[n.service] {
			seenSvc[n.service] = true
			services = append(services, n.service)
		}
	})
	slices.Sort(services)
	pids := make(map[string]string, len(services))
	for i, s := range services {
		pid := "p" + strconv.Itoa(i+1)
		pids[s] = pid
		out.Processes[pid] = JaegerProcess{ServiceName: s, Tags: []JaegerKeyValue{}}
	}
	used := make(map[trace.SpanID]bool, count)
	// Assign unique IDs first, parents before children, so references can use them (as
	// strings, made once a node: a parent's is every child's reference).
	walkNodes(root, func(n *node) {
		for i := 0; used[n.id]; i++ {
			n.id = hashID("dup", n.id.String(), strconv.Itoa(i))
		}
		used[n.id] = true
		n.sid = n.id.String()
	})
	out.Spans = make([]JaegerSpan, 0, count)
	// The spans are measured by the budget a chunk at a time (renderBudget.takeSpans), drawn a
	// chunk at a time too: a budget that runs out leaves at most a chunk drawn in vain.
	taken, full := 0, b != nil && b.exhausted // a budget spent by the traces drawn before: none of this one
	chunk := b.chunk()
	take := func() {
		k := b.takeSpans(out.Spans[taken:], taken == 0) // the root is always drawn
		if taken+k < len(out.Spans) {
			clear(out.Spans[taken+k:])
			out.Spans, full = out.Spans[:taken+k], true
		}
		taken = len(out.Spans)
		chunk = b.chunk()
	}
	walkNodes(root, func(n *node) {
		if full {
			return
		}
		if n.kind == nodeEvent && n.tags == nil {
			spanDetails(n, n.ev)
		}
		if n.kind == nodeRequest && n.tags == nil {
			spanDetails(n, n.req)
		}
		js := JaegerSpan{
			TraceID: tid, SpanID: n.sid, OperationName: n.operation, References: []JaegerReference{},
			StartTime: n.start.UnixMicro(), Duration: max(n.end.Sub(n.start).Microseconds(), 0),
			Tags: n.tags, Logs: make([]JaegerLog, 0, len(n.logs)), ProcessID: pids[n.service], Warnings: n.warnings,
		}
		if js.Tags == nil {
			js.Tags = []JaegerKeyValue{}
		}
		if n.parent != nil {
			js.References = append(js.References, JaegerReference{RefType: "CHILD_OF", TraceID: tid, SpanID: n.parent.idString()})
		}
		if n.ref != nil {
			js.References = append(js.References, JaegerReference{RefType: "FOLLOWS_FROM", TraceID: tid, SpanID: n.ref.idString()})
		}
		for _, l := range n.logs {
			js.Logs = append(js.Logs, JaegerLog{Timestamp: l.time.UnixMicro(), Fields: l.fields})
		}
		out.Spans = append(out.Spans, js)
		if len(out.Spans)-taken >= chunk {
			take()
		}
	})
	if !full {
		take()
	}
	return out
}
