package linkrule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/kube"
	"github.com/kelemetry/kelemetry/telemetry"
)

// linkerName is the Name() of the rule linker.
const linkerName = "linkrule"

// Rule sets of a Linker: rules read from a directory and rules watched in a cluster.
const (
	setDir     = "dir"
	setCluster = "cluster"
)

// Linker is an aggregator.Linker that applies LinkRules. Its rules can be replaced at any time
// (Put, Delete, Replace); a lookup uses the rules of the moment it starts. Rules are indexed by
// group and resource, and the body of an object is decoded once for all the rules that select
// its resource.
type Linker struct {
	getter kube.ObjectGetter
	lister lister
	logger *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	sets  map[string]map[string]*Rule // set -> rule name -> rule
	index atomic.Pointer[ruleIndex]

	warnMu sync.Mutex
	warned map[string]time.Time // rule name -> last Warn

	evaluations, links, errs, truncated metric.Int64Counter
	noBody                              metric.Int64Counter
}

// newLinker returns a Linker without rules. getter fetches bodies the events did not carry and
// lister lists the objects of selector targets; both may be nil (no cluster). ts gives the logger
// and meter provider (unset: slog.Default(), no metrics); a metric that cannot be created is
// logged and not recorded.
func newLinker(getter kube.ObjectGetter, lister lister, ts telemetry.Settings) *Linker {
	logger := ts.Log().With("linker", linkerName)
	meter := instrument.NewMeter(ts, meterScope)
	l := &Linker{
		getter: getter,
		lister: lister,
		logger: logger,
		now:    time.Now,
		sets:   map[string]map[string]*Rule{},
		warned: map[string]time.Time{},
	}
	l.evaluations = meter.Counter("kelemetry.linkrule.evaluations", "Objects a link rule was evaluated on (after its resources, namespaces and labels matched), by rule.", "")
	l.links = meter.Counter("kelemetry.linkrule.links", "Links made by link rules, by rule.", "")
	l.errs = meter.Counter("kelemetry.linkrule.errors", "Failed link rule evaluations (expression error, cost limit, failed list), by rule.", "")
	l.truncated = meter.Counter("kelemetry.linkrule.truncated", "Link rule evaluations whose targets were cut at the per-object limit, by rule.", "")
	l.noBody = meter.Counter("kelemetry.linkrule.no_body", "Objects selected by a rule's resources whose body was neither in the event nor fetchable.", "", *attribute.EmptySet())
	if err := meter.Err(); err != nil {
		// The linker works without its metrics: not an error of the constructor.
		logger.Error("cannot create metrics", slog.Any("error", err))
	}
	l.index.Store(&ruleIndex{})
	return l
}

// Name returns "linkrule".
func (*Linker) Name() string { return linkerName }

// Put adds or replaces a rule of a set.
func (l *Linker) Put(set string, r *Rule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sets[set] == nil {
		l.sets[set] = map[string]*Rule{}
	}
	l.sets[set][r.Name] = r
	l.rebuild()
	l.known(r)
}

// Delete removes a rule of a set.
func (l *Linker) Delete(set, name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.sets[set][name]; !ok {
		return
	}
	delete(l.sets[set], name)
	l.rebuild()
}

// Replace replaces all rules of a set.
func (l *Linker) Replace(set string, rules []*Rule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]*Rule, len(rules))
	for _, r := range rules {
		m[r.Name] = r
	}
	l.sets[set] = m
	l.rebuild()
	for _, r := range rules {
		l.known(r)
	}
}

// known exports the by-rule counters of r at 0, so that an increase() over them sees its first
// evaluation, link or error: a rule's name is known once it is put.
func (l *Linker) known(r *Rule) {
	if r.measure == nil {
		return // not compiled: never evaluated
	}
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{l.evaluations, l.links, l.errs, l.truncated} {
		c.Add(ctx, 0, r.measure)
	}
}

// rule returns a rule of a set, or nil.
func (l *Linker) rule(set, name string) *Rule {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sets[set][name]
}

// rules returns every rule, sorted by set and name.
func (l *Linker) rules() []*Rule {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Rule
	for _, set := range l.sets {
		for _, r := range set {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Rule) int { return cmp.Or(cmp.Compare(a.Origin, b.Origin), cmp.Compare(a.Name, b.Name)) })
	return out
}

// ruleIndex finds the rules of a group and resource.
type ruleIndex struct {
	exact      map[GroupResource][]*Rule
	anyRes     map[string][]*Rule // group -> rules with resource "*"
	anyGroup   map[string][]*Rule // resource -> rules with group "*"
	everything []*Rule
	size       int
}

// rebuild makes a new index from the sets. l.mu is held.
func (l *Linker) rebuild() {
	idx := &ruleIndex{exact: map[GroupResource][]*Rule{}, anyRes: map[string][]*Rule{}, anyGroup: map[string][]*Rule{}}
	sets := make([]string, 0, len(l.sets))
	for s := range l.sets {
		sets = append(sets, s)
	}
	slices.Sort(sets)
	for _, s := range sets {
		names := make([]string, 0, len(l.sets[s]))
		for n := range l.sets[s] {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			r := l.sets[s][n]
			idx.size++
			for _, gr := range r.resources {
				switch {
				case gr.Group == wildcard && gr.Resource == wildcard:
					idx.everything = appendOnce(idx.everything, r)
				case gr.Resource == wildcard:
					idx.anyRes[gr.Group] = appendOnce(idx.anyRes[gr.Group], r)
				case gr.Group == wildcard:
					idx.anyGroup[gr.Resource] = appendOnce(idx.anyGroup[gr.Resource], r)
				default:
					idx.exact[gr] = appendOnce(idx.exact[gr], r)
				}
			}
		}
	}
	l.index.Store(idx)
	// Forget the warnings of rules that are gone.
	l.warnMu.Lock()
	for name := range l.warned {
		if !l.hasRule(name) {
			delete(l.warned, name)
		}
	}
	l.warnMu.Unlock()
}

// hasRule reports whether a rule of that name is in any set. l.mu is held.
func (l *Linker) hasRule(name string) bool {
	for _, set := range l.sets {
		if _, ok := set[name]; ok {
			return true
		}
	}
	return false
}

func appendOnce(rules []*Rule, r *Rule) []*Rule {
	if slices.Contains(rules, r) {
		return rules
	}
	return append(rules, r)
}

// candidates returns the rules whose resources select group/resource.
func (idx *ruleIndex) candidates(group, resource string) []*Rule {
	if idx.size == 0 {
		return nil
	}
	buckets := [4][]*Rule{idx.exact[GroupResource{Group: group, Resource: resource}], idx.anyRes[group], idx.anyGroup[resource], idx.everything}
	var out []*Rule
	n := 0
	for _, b := range buckets {
		if len(b) > 0 {
			n++
			out = b
		}
	}
	if n <= 1 {
		return out
	}
	out = nil
	for _, b := range buckets {
		for _, r := range b {
			out = appendOnce(out, r)
		}
	}
	return out
}

// Lookup applies the rules that select obj's resource. Errors of single rules are counted,
// recorded in the rule's Stats and logged (at most once a minute per rule); they do not stop
// the other rules. Lookup returns an error only when obj's body is needed and cannot be fetched.
func (l *Linker) Lookup(ctx context.Context, obj aggregator.Object) ([]aggregator.Link, error) {
	rules := l.index.Load().candidates(obj.Group, obj.Resource)
	if len(rules) == 0 {
		return nil, nil
	}
	in, err := l.input(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("linkrule: %s: %w", obj.ObjectRef, err)
	}
	if in == nil {
		l.noBody.Add(ctx, 1)
		return nil, nil
	}
	var links []aggregator.Link
	contributed := 0
	for _, r := range rules {
		before := len(links)
		var out outcome
		links, out, err = r.eval(ctx, in, l.lister, links)
		if out.evaluated {
			l.evaluations.Add(ctx, 1, r.measure)
		}
		if n := len(links) - before; n > 0 {
			l.links.Add(ctx, int64(n), r.measure)
			contributed++
		}
		if out.truncated {
			l.truncated.Add(ctx, 1, r.measure)
		}
		if err != nil {
			l.errs.Add(ctx, 1, r.measure)
			l.warn(ctx, r, obj, err)
		}
	}
	if contributed > 1 {
		links = dedupe(links)
	}
	return links, nil
}

// dedupe drops the links to a target and role already linked by an earlier rule (the link span
// would be the same: its ID does not depend on the class).
func dedupe(links []aggregator.Link) []aggregator.Link {
	type key struct {
		target aggregator.ObjectKey
		role   aggregator.Role
	}
	seen := make(map[key]struct{}, len(links))
	out := links[:0]
	for _, l := range links {
		k := key{l.Target.Key(), l.Role}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, l)
	}
	return out
}

// input decodes obj's body, or fetches it when the event carried none (or a subresource's). It
// returns nil when there is no body to be had.
func (l *Linker) input(ctx context.Context, obj aggregator.Object) (*input, error) {
	if len(obj.Body) > 0 && string(obj.Body) != "null" {
		in, err := newInput(obj.ObjectRef, obj.Body)
		if err == nil {
			return in, nil
		}
		if l.getter == nil {
			if errors.Is(err, errNotOwnBody) {
				return nil, nil
			}
			return nil, err
		}
	}
	if l.getter == nil {
		return nil, nil
	}
	body, err := l.getter.Get(ctx, obj.ObjectRef)
	if errors.Is(err, kube.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	in, err := newInput(obj.ObjectRef, body)
	if errors.Is(err, errNotOwnBody) {
		return nil, nil
	}
	return in, err
}

const warnEvery = time.Minute

func (l *Linker) warn(ctx context.Context, r *Rule, obj aggregator.Object, err error) {
	now := l.now()
	l.warnMu.Lock()
	last, seen := l.warned[r.Name]
	quiet := seen && now.Sub(last) < warnEvery
	if !quiet {
		if len(l.warned) > 4096 { // bounded: forget everyone's last warning
			clear(l.warned)
		}
		l.warned[r.Name] = now
	}
	l.warnMu.Unlock()
	if quiet {
		return
	}
	l.logger.LogAttrs(ctx, slog.LevelWarn, "link rule evaluation failed",
		slog.String("rule", r.Name), slog.String("object", obj.String()), slog.Any("error", err))
}

// clusterLister lists objects through the clusters' dynamic clients.
type clusterLister struct {
	Clusters kube.Clusters
	// Timeout bounds one list (default 5s).
	Timeout time.Duration
}

// List lists the objects matching selector, at most limit of them.
// An empty selector lists nothing (not every object).
func (c clusterLister) List(ctx context.Context, cluster string, gvr schema.GroupVersionResource, namespace string, selector labels.Selector, limit int) ([]NamespacedName, bool, error) {
	if selector == nil || selector.Empty() || limit <= 0 {
		return nil, false, nil
	}
	dyn, err := c.Clusters.Dynamic(cluster)
	if err != nil {
		return nil, false, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String(), Limit: int64(limit)})
	if err != nil {
		return nil, false, err
	}
	out := make([]NamespacedName, 0, min(len(list.Items), limit))
	for _, it := range list.Items {
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, NamespacedName{Namespace: it.GetNamespace(), Name: it.GetName()})
	}
	truncated := list.GetContinue() != "" || (list.GetRemainingItemCount() != nil && *list.GetRemainingItemCount() > 0)
	return out, truncated, nil
}

// meterScope is the instrumentation scope of the package's metrics.
const meterScope = "github.com/kelemetry/kelemetry/linkrule"
