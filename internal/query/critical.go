package query

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kelemetry/kelemetry/aggregator"
)

// diffPathAttr is the attribute of a diff log naming the changed field (diff.AttrPath).
const diffPathAttr = "kelemetry.diff.path"

// maxCausalEvents bounds the writes one critical-path analysis considers; a larger trace is
// analysed over its latest maxCausalEvents writes and the answer says so (Truncated).
const maxCausalEvents = 50000

// maxCauseScan bounds the events looked at per related object when searching for a cause.
const maxCauseScan = 64

// criticalStep is one step of a critical path: a write, who made it, and how long it waited
// for its cause (the previous step).
type criticalStep struct {
	// SpanID is the event span's ID, as the Jaeger API draws it.
	SpanID string `json:"spanID"`
	// Time is when the request arrived, End when it completed.
	Time time.Time `json:"time"`
	End  time.Time `json:"end"`
	// TimeMicros is Time in Unix microseconds: the event's timestamp in the Jaeger API (the
	// folded log's, or the event span's start), to find the step in a drawn trace.
	TimeMicros int64 `json:"timeMicros"`
	// Object is what was written.
	Object SummaryObject `json:"object"`
	// User is the user that acted; Controller its short name (controllerName).
	User       string `json:"user"`
	Controller string `json:"controller"`
	// Verb and Subresource are the request's; Fields the changed field paths (diff logs).
	Verb        string   `json:"verb"`
	Subresource string   `json:"subresource,omitempty"`
	Fields      []string `json:"fields,omitempty"`
	Title       string   `json:"title"`
	// Rule is how the step was tied to the previous one: a CausalRule's name, "linked" (the
	// latest write of a linked object), "unexplained" (nothing linked; the root's first event is
	// taken) or "start" for the first step.
	Rule string `json:"rule"`
	// WaitSeconds is the time between the end of the previous step and this step's start (the
	// controller's reaction time); ActSeconds the request's own duration.
	WaitSeconds float64 `json:"waitSeconds"`
	ActSeconds  float64 `json:"actSeconds"`
	// Person is set when the step's user is a person (a client such as kubectl, not a
	// controller): its wait is time spent waiting for that person, no controller's reaction.
	Person bool `json:"person,omitempty"`
	// SlowPart names the part of the request that took most of ActSeconds, from
	// kube-apiserver's own spans of it ("validating webhook policy.example.com"), and
	// SlowPartSeconds its time; empty when the request has no such spans.
	SlowPart        string  `json:"slowPart,omitempty"`
	SlowPartSeconds float64 `json:"slowPartSeconds,omitempty"`
}

// controllerWait is the time one controller spent on a critical path.
type controllerWait struct {
	// Person is set for a person's steps: their waits are waiting for a person.
	Person      bool    `json:"person,omitempty"`
	Controller  string  `json:"controller"`
	Steps       int     `json:"steps"`
	WaitSeconds float64 `json:"waitSeconds"`
	ActSeconds  float64 `json:"actSeconds"`
}

// controllerTimes are one controller's reaction times over all writes of a trace.
type controllerTimes struct {
	Controller string `json:"controller"`
	// Users are the users behind the controller name, sorted.
	Users []string `json:"users"`
	// Writes counts its successful writes; Reactions those with a cause (a rule or a linked
	// object's earlier write), over which the wait times are taken.
	Writes    int `json:"writes"`
	Reactions int `json:"reactions"`
	// WaitSeconds is the total wait, MeanWaitSeconds and MaxWaitSeconds its mean and maximum.
	WaitSeconds     float64 `json:"waitSeconds"`
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
	MaxWaitSeconds  float64 `json:"maxWaitSeconds"`
	// ActSeconds is the total duration of its requests, MaxActSeconds the longest.
	ActSeconds    float64 `json:"actSeconds"`
	MaxActSeconds float64 `json:"maxActSeconds"`
}

// CriticalPath answers "why did it take so long": the chain of writes from the first event of
// the root object to the last write of the tree, and the controllers' reaction times.
type CriticalPath struct {
	TraceID string `json:"traceID"`
	// Start and End are the first step's start and the last step's end.
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	DurationSeconds float64   `json:"durationSeconds"`
	// Steps are in time order; the first is the root's first write (or the earliest write
	// reached), the last the last write of the tree.
	Steps []criticalStep `json:"steps"`
	// Waits is "where the time went": per controller, the waits and acts of the steps it
	// made, longest wait first.
	Waits []controllerWait `json:"waits"`
	// Controllers are the reaction times of every controller over the whole trace, longest
	// total wait first.
	Controllers []controllerTimes `json:"controllers"`
	// Slowest is the step of a controller (not a person, not the start) with the longest wait:
	// the slowest controller reaction on the path, the headline of "why did it take so long".
	Slowest *criticalStep `json:"slowest,omitempty"`
	// SlowestRequest is the step whose request took longest inside the API server, among the
	// steps with kube-apiserver's spans (SlowPart): where a write itself, not the wait for it,
	// was slow (an admission webhook, etcd).
	SlowestRequest *criticalStep `json:"slowestRequest,omitempty"`
	// PersonWaitSeconds is the time the path spent waiting for people (their steps' waits).
	PersonWaitSeconds float64 `json:"personWaitSeconds"`
	// UnexplainedWaitSeconds is the time before steps no rule ties to the one before (rule
	// "unexplained"): no controller's reaction, so no controller's wait.
	UnexplainedWaitSeconds float64 `json:"unexplainedWaitSeconds"`
	// NoPath, when set, says why the trace has no critical path: no write in it reacted to
	// another by a causal rule (a Node's heartbeats, unrelated objects), so no chain explains its
	// time. Steps and Waits are then empty; Controllers still gives the reaction times.
	NoPath string `json:"noPath,omitempty"`
	// Truncated, when set, says what was left out (a query budget, or maxCausalEvents).
	Truncated string `json:"truncated,omitempty"`
}

// causalEvent is one write of the analysed graph.
type causalEvent struct {
	sp *aggregator.Span
	// end is the write's end: its span's, or its start when the span has none or ends
	// before it starts (clock skew between the request's stages).
	end        time.Time
	key        aggregator.ObjectKey
	idx        int
	user       string
	controller string
	// person: the user acted through a client people use (isPersonAgent).
	person    bool
	verb, sub string
	fields    []string
	// requests are kube-apiserver's spans of the write's request.
	requests []*aggregator.Span
}

func seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// readVerbs are the verbs that do not change objects.
var readVerbs = map[string]bool{"get": true, "list": true, "watch": true}

// causal is the analysis state of one graph.
type causal struct {
	rules  []CausalRule
	events []*causalEvent
	byObj  map[aggregator.ObjectKey][]*causalEvent
	// byParent holds, per object, the events of its children in one list, in order.
	byParent map[aggregator.ObjectKey][]*causalEvent
	// parents and children are the relations of the graph (tree edges and references).
	parents, children map[aggregator.ObjectKey][]aggregator.ObjectKey
	truncated         string
}

func newCausal(g *Graph, rules []CausalRule) *causal {
	c := &causal{rules: rules, byObj: map[aggregator.ObjectKey][]*causalEvent{}, byParent: map[aggregator.ObjectKey][]*causalEvent{},
		parents: map[aggregator.ObjectKey][]aggregator.ObjectKey{}, children: map[aggregator.ObjectKey][]aggregator.ObjectKey{}}
	seen := map[[2]aggregator.ObjectKey]bool{}
	addEdge := func(e edge) {
		pair := [2]aggregator.ObjectKey{e.Parent, e.Child}
		if !seen[pair] {
			seen[pair] = true
			c.children[e.Parent] = append(c.children[e.Parent], e.Child)
			c.parents[e.Child] = append(c.parents[e.Child], e.Parent)
		}
	}
	for _, es := range g.Children {
		for _, e := range es {
			addEdge(e)
		}
	}
	for _, es := range g.References {
		for _, e := range es {
			addEdge(e)
		}
	}
	for k, o := range g.Objects {
		for _, sp := range o.Events {
			verb, _ := sp.Attributes.Get(aggregator.AttrVerb)
			if verb == "" || readVerbs[verb] || sp.Error {
				continue
			}
			user, _ := sp.Attributes.Get(aggregator.AttrUser)
			sub, _ := sp.Attributes.Get(aggregator.AttrSubresource)
			agent, _ := sp.Attributes.Get(aggregator.AttrUserAgent)
			ev := &causalEvent{sp: sp, end: sp.End, key: k, user: user, controller: controllerName(user), verb: verb, sub: sub,
				person: isPersonAgent(user, agent), requests: o.Requests[sp.SpanID]}
			if ev.end.Before(sp.Start) {
				ev.end = sp.Start
			}
			for _, l := range sp.Logs {
				if l.Type != aggregator.LogTypeDiff {
					continue
				}
				if p, ok := l.Attributes.Get(diffPathAttr); ok && p != "" {
					ev.fields = append(ev.fields, p)
				}
			}
			c.events = append(c.events, ev)
		}
	}
	slices.SortFunc(c.events, func(a, b *causalEvent) int {
		return cmp.Or(a.sp.Start.Compare(b.sp.Start), a.end.Compare(b.end), bytes.Compare(a.sp.SpanID[:], b.sp.SpanID[:]))
	})
	if n := len(c.events); n > maxCausalEvents {
		c.events = c.events[n-maxCausalEvents:]
		c.truncated = fmt.Sprintf("only the latest %d of %d writes were analysed", maxCausalEvents, n)
	}
	for i, ev := range c.events {
		ev.idx = i
		c.byObj[ev.key] = append(c.byObj[ev.key], ev)
		for _, p := range c.parents[ev.key] {
			c.byParent[p] = append(c.byParent[p], ev)
		}
	}
	return c
}

// related lists the event lists (each in order) of the objects in relation rel to k: the
// children's events come in one list.
func (c *causal) related(k aggregator.ObjectKey, rel Relation) [][]*causalEvent {
	var out [][]*causalEvent
	if rel == RelSelf || rel == RelLinked {
		out = append(out, c.byObj[k])
	}
	if rel == RelParent || rel == RelLinked {
		for _, p := range c.parents[k] {
			out = append(out, c.byObj[p])
		}
	}
	if rel == RelChild || rel == RelLinked {
		out = append(out, c.byParent[k])
	}
	if rel == RelSibling {
		// The parents' children's events, the object's own among them.
		for _, p := range c.parents[k] {
			out = append(out, c.byParent[p])
		}
	}
	return out
}

// latest returns the latest event before index idx in lists that ok accepts, looking at most
// maxCauseScan events back in each list.
func (c *causal) latest(lists [][]*causalEvent, idx int, ok func(*causalEvent) bool) *causalEvent {
	var best *causalEvent
	for _, evs := range lists {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].idx >= idx })
		for n := 0; i > 0 && n < maxCauseScan; n++ {
			i--
			if best != nil && evs[i].idx < best.idx {
				break
			}
			if ok(evs[i]) {
				best = evs[i]
				break
			}
		}
	}
	return best
}

// cause finds what s reacted to and the rule that says so; nil when nothing linked precedes it.
func (c *causal) cause(s *causalEvent) (*causalEvent, string) {
	var best *causalEvent
	rule := ""
	for i := range c.rules {
		r := &c.rules[i]
		if !r.reacts(s) {
			continue
		}
		if ev := c.latest(c.related(s.key, r.Relation), s.idx, r.causes); ev != nil && (best == nil || ev.idx > best.idx) {
			best, rule = ev, r.Name
		}
	}
	if best != nil {
		return best, rule
	}
	if ev := c.latest(c.related(s.key, RelLinked), s.idx, func(*causalEvent) bool { return true }); ev != nil {
		return ev, "linked"
	}
	return nil, ""
}

func (c *causal) step(ev *causalEvent, rule string, wait time.Duration) criticalStep {
	s := criticalStep{
		SpanID: ev.sp.SpanID.String(), Time: ev.sp.Start.UTC(), End: ev.end.UTC(), TimeMicros: ev.sp.Start.UnixMicro(),
		Object: summaryObject(ev.key),
		User:   ev.user, Controller: ev.controller, Verb: ev.verb, Subresource: ev.sub, Fields: ev.fields, Title: ev.sp.Name,
		Rule: rule, WaitSeconds: seconds(wait), ActSeconds: seconds(ev.end.Sub(ev.sp.Start)), Person: ev.person,
	}
	if label, d, ok := slowPart(ev.requests); ok {
		s.SlowPart, s.SlowPartSeconds = label, d.Seconds()
	}
	return s
}

// analyzeCritical computes the critical path of g and its controllers' reaction times under
// rules (DefaultCausalRules when nil). Only successful writes (audit events with a write verb)
// take part. traceID names the answer.
func analyzeCritical(g *Graph, traceID string, rules []CausalRule) CriticalPath {
	if rules == nil {
		rules = DefaultCausalRules
	}
	c := newCausal(g, rules)
	out := CriticalPath{TraceID: traceID, Steps: []criticalStep{}, Waits: []controllerWait{}, Controllers: []controllerTimes{},
		Truncated: g.Truncated}
	if c.truncated != "" {
		out.Truncated = joinNonEmptyMsg(out.Truncated, c.truncated)
	}
	if len(c.events) == 0 {
		return out
	}
	causes := make([]*causalEvent, len(c.events))
	rulesOf := make([]string, len(c.events))
	for i, ev := range c.events {
		causes[i], rulesOf[i] = c.cause(ev)
	}

	// The path: back from the write that ended last.
	last := c.events[0]
	for _, ev := range c.events[1:] {
		if !ev.end.Before(last.end) {
			last = ev
		}
	}
	var first *causalEvent
	for _, r := range g.Roots {
		if evs := c.byObj[r]; len(evs) > 0 && (first == nil || evs[0].idx < first.idx) {
			first = evs[0]
		}
	}
	if first == nil {
		first = c.events[0]
	}
	var rev []criticalStep
	for cur := last; ; {
		if cur == first {
			rev = append(rev, c.step(cur, "start", 0))
			break
		}
		prev, rule := causes[cur.idx], rulesOf[cur.idx]
		if prev == nil && first.idx < cur.idx {
			prev, rule = first, "unexplained"
		}
		if prev == nil {
			rev = append(rev, c.step(cur, "start", 0))
			break
		}
		rev = append(rev, c.step(cur, rule, cur.sp.Start.Sub(prev.end)))
		cur = prev
	}
	slices.Reverse(rev)
	out.Steps = rev
	out.Start, out.End = rev[0].Time, last.end.UTC()
	out.DurationSeconds = seconds(out.End.Sub(out.Start))

	// A chain is a reaction by a causal rule, or to a write of another linked object or of
	// another controller; a path of one controller's repeated writes of one object (a Node's
	// heartbeats) or of steps nothing explains is no chain, and no critical path is invented.
	chained := false
	for i, s := range out.Steps {
		switch {
		case i == 0, s.Rule == "start", s.Rule == "unexplained":
		case s.Rule == "linked":
			prev := out.Steps[i-1]
			chained = chained || s.Object != prev.Object || s.Controller != prev.Controller
		default:
			chained = true
		}
	}
	if !chained && len(out.Steps) > 1 {
		out.NoPath = "no write here reacted to a write of another object (a Node's heartbeats, unrelated objects): no chain of reactions explains the time"
		out.Steps, out.Start, out.End, out.DurationSeconds = []criticalStep{}, time.Time{}, time.Time{}, 0
	}

	waits := map[string]*controllerWait{}
	for i, s := range out.Steps {
		unexplained := s.Rule == "unexplained"
		switch {
		case s.Person:
			out.PersonWaitSeconds += s.WaitSeconds
		case unexplained:
			out.UnexplainedWaitSeconds += s.WaitSeconds
		case s.Rule != "start" && (out.Slowest == nil || s.WaitSeconds > out.Slowest.WaitSeconds):
			out.Slowest = &out.Steps[i]
		}
		if s.SlowPart != "" && (out.SlowestRequest == nil || s.ActSeconds > out.SlowestRequest.ActSeconds) {
			out.SlowestRequest = &out.Steps[i]
		}
		w := waits[s.Controller]
		if w == nil {
			w = &controllerWait{Controller: s.Controller, Person: s.Person}
			waits[s.Controller] = w
		}
		w.Steps++
		if !unexplained {
			w.WaitSeconds += s.WaitSeconds
		}
		w.ActSeconds += s.ActSeconds
	}
	for _, w := range waits {
		out.Waits = append(out.Waits, *w)
	}
	slices.SortFunc(out.Waits, func(a, b controllerWait) int {
		return cmp.Or(cmp.Compare(b.WaitSeconds, a.WaitSeconds), cmp.Compare(a.Controller, b.Controller))
	})

	times := map[string]*controllerTimes{}
	for i, ev := range c.events {
		t := times[ev.controller]
		if t == nil {
			t = &controllerTimes{Controller: ev.controller, Users: []string{}}
			times[ev.controller] = t
		}
		if !slices.Contains(t.Users, ev.user) {
			t.Users = append(t.Users, ev.user)
		}
		t.Writes++
		act := seconds(ev.end.Sub(ev.sp.Start))
		t.ActSeconds += act
		t.MaxActSeconds = max(t.MaxActSeconds, act)
		if causes[i] != nil {
			wait := seconds(ev.sp.Start.Sub(causes[i].end))
			t.Reactions++
			t.WaitSeconds += wait
			t.MaxWaitSeconds = max(t.MaxWaitSeconds, wait)
		}
	}
	for _, t := range times {
		if t.Reactions > 0 {
			t.MeanWaitSeconds = t.WaitSeconds / float64(t.Reactions)
		}
		slices.Sort(t.Users)
		out.Controllers = append(out.Controllers, *t)
	}
	slices.SortFunc(out.Controllers, func(a, b controllerTimes) int {
		return cmp.Or(cmp.Compare(b.WaitSeconds, a.WaitSeconds), cmp.Compare(a.Controller, b.Controller))
	})
	return out
}

func joinNonEmptyMsg(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
