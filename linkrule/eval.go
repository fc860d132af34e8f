package linkrule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/kube"
)

// lister lists the names of the objects matching a label selector in a cluster, for targets with
// a selector. It returns at most limit objects and reports whether there were more.
type lister interface {
	List(ctx context.Context, cluster string, gvr schema.GroupVersionResource, namespace string, selector labels.Selector, limit int) (objs []NamespacedName, truncated bool, err error)
}

// NamespacedName names one listed object.
type NamespacedName struct{ Namespace, Name string }

// errNoLister is returned for a selector target when no Lister is configured (no cluster).
var errNoLister = errors.New("selector targets need a cluster client")

// Stats are a rule's counters since it was compiled.
type Stats struct {
	Evaluations, LinksMade, Errors, Truncated atomic.Int64
	lastError                                 atomic.Pointer[string]
}

// LastError returns the most recent evaluation error, or "".
func (s *Stats) LastError() string {
	if p := s.lastError.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *Stats) recordError(err error) {
	s.Errors.Add(1)
	msg := err.Error()
	s.lastError.Store(&msg)
}

// Stats returns the rule's counters.
func (r *Rule) Stats() *Stats { return r.stats }

// Role and Class return the link role and class of the rule.
func (r *Rule) Role() aggregator.Role { return r.role }

// Class returns the rule's link class.
func (r *Rule) Class() string { return r.class }

// input is a source object decoded once and shared by every rule evaluated on it.
type input struct {
	ref    aggregator.ObjectRef
	object map[string]any
	labels labels.Set
	act    interpreter.Activation
}

var errNotOwnBody = errors.New("body is not the object's own")

// newInput decodes body. It returns errNotOwnBody for a subresource's body or another object's.
func newInput(ref aggregator.ObjectRef, body []byte) (*input, error) {
	// Integers decode as int64 (not float64), as Kubernetes' own CEL sees them.
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errNotOwnBody
	}
	if kind, _ := obj["kind"].(string); !kube.IsObjectKind(kind) {
		return nil, errNotOwnBody
	}
	in := &input{ref: ref, object: obj}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		if name, _ := meta["name"].(string); name != "" && ref.Name != "" && name != ref.Name {
			return nil, errNotOwnBody
		}
		if uid, _ := meta["uid"].(string); uid != "" && ref.UID != "" && uid != ref.UID {
			return nil, errNotOwnBody
		}
		if l, ok := meta["labels"].(map[string]any); ok && len(l) > 0 {
			in.labels = make(labels.Set, len(l))
			for k, v := range l {
				if s, ok := v.(string); ok {
					in.labels[k] = s
				}
			}
		}
	}
	act, err := interpreter.NewActivation(map[string]any{varObject: obj, varCluster: ref.Cluster})
	if err != nil {
		return nil, fmt.Errorf("activation: %w", err)
	}
	in.act = act
	return in, nil
}

// matchesResource reports whether the rule selects an object of this group and resource.
func (r *Rule) matchesResource(group, resource string) bool {
	for _, gr := range r.resources {
		if (gr.Group == wildcard || gr.Group == group) && (gr.Resource == wildcard || gr.Resource == resource) {
			return true
		}
	}
	return false
}

// matchesCheap checks the namespaces and the label selector.
func (r *Rule) matchesCheap(in *input) bool {
	if r.namespaces != nil {
		if _, ok := r.namespaces[in.ref.Namespace]; !ok {
			return false
		}
	}
	return r.selector == nil || r.selector.Matches(in.labels)
}

// Evaluate applies the rule to one object, whose body must be set. lister may be nil when the
// rule has no selector target. Evaluation errors are returned along with the links the other
// targets made; an object the rule does not select gives no links and no error. The rule's
// Stats are updated.
func (r *Rule) Evaluate(ctx context.Context, obj aggregator.Object, lister lister) ([]aggregator.Link, error) {
	if !r.matchesResource(obj.Group, obj.Resource) {
		return nil, nil
	}
	in, err := newInput(obj.ObjectRef, obj.Body)
	if err != nil {
		return nil, err
	}
	links, _, err := r.eval(ctx, in, lister, nil)
	return links, err
}

// outcome says what one evaluation of a rule did, for the caller's metrics (the rule's Stats
// are shared by concurrent evaluations, so their deltas cannot tell).
type outcome struct {
	evaluated, truncated bool
}

// errEvalTimeout is the cause of an evaluation stopped at CompileOptions.EvalTimeout.
var errEvalTimeout = errors.New("CEL evaluation took longer than the time limit (linkRules.evalTimeout); the expression iterates too much")

// eval applies the rule to an input that matched the resource index. It appends to links.
func (r *Rule) eval(ctx context.Context, in *input, lister lister, links []aggregator.Link) ([]aggregator.Link, outcome, error) {
	var out outcome
	if !r.matchesCheap(in) {
		return links, out, nil
	}
	out.evaluated = true
	r.stats.Evaluations.Add(1)
	// The expressions of this evaluation share one deadline; lists of selector targets have
	// their own timeout (clusterLister) and use ctx.
	celCtx, cancel := context.WithTimeoutCause(ctx, r.opts.EvalTimeout, errEvalTimeout)
	defer cancel()
	if r.condition != nil {
		v, err := r.run(celCtx, r.condition, in)
		if err != nil {
			if isMissing(err) {
				return links, out, nil
			}
			err = fmt.Errorf("rule %s: condition: %w", r.Name, err)
			r.stats.recordError(err)
			return links, out, err
		}
		if b, ok := v.(types.Bool); !ok || !bool(b) {
			return links, out, nil
		}
	}
	start := len(links)
	budget := r.opts.MaxTargetsPerObject
	var errs []error
	for i := range r.targets {
		var cut bool
		var err error
		links, cut, err = r.evalTarget(ctx, celCtx, &r.targets[i], in, lister, links, start, start+budget)
		out.truncated = out.truncated || cut
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %s: targets[%d]: %w", r.Name, i, err))
		}
	}
	if out.truncated {
		r.stats.Truncated.Add(1)
	}
	r.stats.LinksMade.Add(int64(len(links) - start))
	if err := errors.Join(errs...); err != nil {
		r.stats.recordError(err)
		return links, out, err
	}
	return links, out, nil
}

// evalTarget appends the links of one target, up to max links in total. links[start:] are the
// rule's links so far, which a new link must not repeat.
// CEL runs with celCtx, the list with ctx.
func (r *Rule) evalTarget(ctx, celCtx context.Context, t *target, in *input, lister lister, links []aggregator.Link, start, max int) ([]aggregator.Link, bool, error) {
	ns := in.ref.Namespace
	if t.clusterScoped {
		ns = ""
	}
	if t.namespace != nil {
		v, err := r.run(celCtx, t.namespace, in)
		if err != nil {
			if isMissing(err) {
				return links, false, nil
			}
			return links, false, fmt.Errorf("namespace: %w", err)
		}
		switch v := v.(type) {
		case types.String:
			ns = string(v)
		case types.Null:
			return links, false, nil
		default:
			return links, false, fmt.Errorf("namespace: got %s, want string", v.Type())
		}
	}
	cluster := t.cluster
	if cluster == "" {
		cluster = in.ref.Cluster
	}
	// add links a target unless it is the source or already linked; it returns false when the
	// target is new but there is no room for it (a repeat of a linked target is no truncation).
	add := func(ns, name string) bool {
		ref := aggregator.ObjectRef{Cluster: cluster, Group: t.group, Version: t.version, Resource: t.resource, Namespace: ns, Name: name}
		if ref.Key() == in.ref.Key() {
			return true
		}
		for _, l := range links[start:] {
			if l.Target.Key() == ref.Key() {
				return true
			}
		}
		if len(links) >= max {
			return false
		}
		links = append(links, aggregator.Link{Target: ref, Role: r.role, Class: r.class})
		return true
	}
	if t.name != nil {
		v, err := r.run(celCtx, t.name, in)
		if err != nil {
			if isMissing(err) {
				return links, false, nil
			}
			return links, false, fmt.Errorf("name: %w", err)
		}
		names, err := stringsOf(v)
		if err != nil {
			return links, false, fmt.Errorf("name: %w", err)
		}
		for _, n := range names {
			if !add(ns, n) {
				return links, true, nil
			}
		}
		return links, false, nil
	}
	v, err := r.run(celCtx, t.selector, in)
	if err != nil {
		if isMissing(err) {
			return links, false, nil
		}
		return links, false, fmt.Errorf("selector: %w", err)
	}
	sel, err := selectorOf(v)
	if err != nil || sel == nil || sel.Empty() {
		return links, false, err
	}
	if lister == nil {
		return links, false, errNoLister
	}
	room := max - len(links)
	if room <= 0 {
		return links, true, nil
	}
	gvr := schema.GroupVersionResource{Group: t.group, Version: t.version, Resource: t.resource}
	objs, cut, err := lister.List(ctx, cluster, gvr, ns, sel, room)
	if err != nil {
		return links, false, fmt.Errorf("list %s in cluster %q: %w", gvr.GroupResource(), cluster, err)
	}
	for _, o := range objs {
		if !add(o.Namespace, o.Name) {
			return links, true, nil
		}
	}
	return links, cut, nil
}

// run evaluates one program on the input. The cost limit bounds most of its work; loops that
// cost nothing are stopped when ctx ends (checked every interruptCheckFrequency iterations).
func (r *Rule) run(ctx context.Context, prg cel.Program, in *input) (ref.Val, error) {
	v, _, err := prg.ContextEval(ctx, in.act)
	if err != nil {
		// Say which limit, so that users know what to change.
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return nil, fmt.Errorf("%w (%d, linkRules.costLimit)", err, r.opts.CostLimit)
		}
		return nil, err
	}
	return v, nil
}

// isMissing tells whether an evaluation failed because the object lacks a field, which means
// "no target" rather than an error.
func isMissing(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such key") || strings.Contains(msg, "no such attribute")
}

// stringsOf turns a string, a list of strings or null into names; "" and null entries are
// skipped.
func stringsOf(v ref.Val) ([]string, error) {
	switch v := v.(type) {
	case types.String:
		if v == "" {
			return nil, nil
		}
		return []string{string(v)}, nil
	case types.Null:
		return nil, nil
	case traits.Lister:
		var out []string
		it := v.Iterator()
		for it.HasNext() == types.True {
			switch e := it.Next().(type) {
			case types.String:
				if e != "" {
					out = append(out, string(e))
				}
			case types.Null:
			default:
				return nil, fmt.Errorf("list element is %s, want string", e.Type())
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("got %s, want string or list of strings", v.Type())
	}
}

var stringMapType = reflect.TypeOf(map[string]string{})

// selectorOf turns a map of labels or a selector string into a selector; null and empty give nil
// (no target: an empty selector would select everything).
func selectorOf(v ref.Val) (labels.Selector, error) {
	switch v := v.(type) {
	case types.Null:
		return nil, nil
	case types.String:
		if strings.TrimSpace(string(v)) == "" {
			return nil, nil
		}
		sel, err := parseSelector(string(v))
		if err != nil {
			return nil, fmt.Errorf("selector %q: %w", string(v), err)
		}
		return sel, nil
	case traits.Mapper:
		native, err := v.ConvertToNative(stringMapType)
		if err != nil {
			return nil, fmt.Errorf("selector map: %w", err)
		}
		m := native.(map[string]string)
		if len(m) == 0 {
			return nil, nil
		}
		sel, err := labels.ValidatedSelectorFromSet(m)
		if err != nil {
			return nil, fmt.Errorf("selector map: %w", err)
		}
		return sel, nil
	default:
		return nil, fmt.Errorf("selector: got %s, want map of strings or string", v.Type())
	}
}

// selectorCache remembers parsed selector strings (rules usually build few distinct ones).
var selectorCache sync.Map // string -> labels.Selector

const maxCachedSelectors = 1024

var cachedSelectors atomic.Int64

func parseSelector(s string) (labels.Selector, error) {
	if v, ok := selectorCache.Load(s); ok {
		return v.(labels.Selector), nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	if cachedSelectors.Load() < maxCachedSelectors {
		if _, loaded := selectorCache.LoadOrStore(s, sel); !loaded {
			cachedSelectors.Add(1)
		}
	}
	return sel, nil
}

// maxDepth bounds the nesting of a decoded body.
const maxDepth = 100

var jsonDecoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// decodeJSON decodes a JSON document into maps, slices, strings, bools, nil, int64 (for integer
// literals that fit) and float64, as Kubernetes' CEL sees an object.
func decodeJSON(data []byte) (any, error) {
	dec := jsonDecoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewReader(data))
	defer func() {
		dec.Reset(bytes.NewReader(nil))
		jsonDecoders.Put(dec)
	}()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	return v, nil
}

var errTooDeep = errors.New("JSON nested too deeply")

func decodeValue(dec *jsontext.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		return tok.String(), nil
	case '0':
		raw := tok.String()
		if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", raw, err)
		}
		return f, nil
	case '{':
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			k, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := k.String() // the token is valid only until the next read
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		s := []any{}
		for dec.PeekKind() != ']' {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("unexpected JSON token %v", tok.Kind())
	}
}
