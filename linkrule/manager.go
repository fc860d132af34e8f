package linkrule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kelemetry/kelemetry/internal/clip"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Manager keeps a Linker's rules up to date: it loads the rule directory (and reloads it when
// its files change) and watches LinkRule objects in one cluster, compiling each rule once per
// generation and writing its status (compile result and counters) back, coalesced and rate
// limited. Start is non-blocking; Stop waits for the goroutines.
type Manager struct {
	cfg    Config
	linker *Linker
	dyn    dynamic.Interface // nil: no watch
	logger *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	watched map[string]*watchedRule // by name
	// statusCursor is the last rule whose status write filled an interval's budget.
	statusCursor string
	dirSig       string
	dirFailing   bool // the last reload failed and was logged
	// statusFailing: a status write failed and was logged; no more until one succeeds.
	statusFailing bool

	// loops runs the reload loop, the watch and the status writer; set by the first Start.
	loops *loop.Group
}

// watchedRule is the state of one LinkRule object of the cluster.
type watchedRule struct {
	uid        types.UID
	generation int64
	rule       *Rule // nil when rejected
	err        error // why it was rejected
	written    *Status
}

// newManager returns a Manager of l's rules. dyn is the client of the cluster whose LinkRule
// objects are watched; nil (or cfg.DisableWatch) means no watch. The rule directory, when
// configured, is loaded now: a directory that cannot be read is an error, a rule that does not
// compile is logged and skipped. ts gives the logger (unset: slog.Default()).
func newManager(cfg Config, l *Linker, dyn dynamic.Interface, ts telemetry.Settings) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.DisableWatch {
		dyn = nil
	}
	m := &Manager{cfg: cfg, linker: l, dyn: dyn, logger: ts.Log().With("component", "linkrule"), now: time.Now, watched: map[string]*watchedRule{}}
	if cfg.Dir != "" {
		if err := m.loadDir(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Linker returns the managed Linker.
func (m *Manager) Linker() *Linker { return m.linker }

// loadDir (re)loads the rule directory into the linker's "dir" set.
func (m *Manager) loadDir() error {
	sig, err := dirSignature(m.cfg.Dir)
	if err != nil {
		return err
	}
	files, errs, err := LoadDir(m.cfg.Dir)
	if err != nil {
		return err
	}
	for _, err := range errs {
		m.logger.Error("link rule file skipped", slog.Any("error", err))
	}
	var rules []*Rule
	// A name belongs to its first rule in file order (files by name, then documents in order),
	// whether that rule compiles or not: which rule applies never depends on whether another
	// one is valid, and every duplicate is logged.
	seen := map[string]string{}
	for _, f := range files {
		if prev, dup := seen[f.Rule.Name]; dup {
			m.logger.Error("link rule skipped: name already used by an earlier rule", slog.String("rule", f.Rule.Name), slog.String("file", f.Path), slog.String("first", prev))
			continue
		}
		seen[f.Rule.Name] = f.Path
		r, err := Compile(f.Rule, "file:"+f.Path, m.cfg.compileOptions())
		if err != nil {
			m.logger.Error("link rule rejected", slog.String("file", f.Path), slog.Any("error", err))
			continue
		}
		rules = append(rules, r)
	}
	m.linker.Replace(setDir, rules)
	m.mu.Lock()
	m.dirSig = sig
	m.dirFailing = false
	m.mu.Unlock()
	m.logger.Info("link rules loaded", slog.String("dir", m.cfg.Dir), slog.Int("rules", len(rules)), slog.Int("rejected", len(files)-len(rules)), slog.Int("badFiles", len(errs)))
	return nil
}

// errStarted is returned by a second Start.
var errStarted = errors.New("linkrule: manager already started")

// Start starts the directory reload loop and the watch. A Manager starts once.
func (m *Manager) Start(context.Context) error {
	m.mu.Lock()
	if m.loops != nil {
		m.mu.Unlock()
		return errStarted
	}
	loops := &loop.Group{}
	m.loops = loops
	m.mu.Unlock()
	var fns []func(context.Context)
	if m.cfg.Dir != "" && m.cfg.ReloadInterval > 0 {
		fns = append(fns, m.reloadLoop)
	}
	if m.dyn != nil {
		inf := dynamicinformer.NewFilteredDynamicInformer(m.dyn, GroupVersionResource, "", 0, cache.Indexers{}, nil).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { m.onUpsert(obj) },
			UpdateFunc: func(_, obj any) { m.onUpsert(obj) },
			DeleteFunc: m.onDelete,
		}); err != nil {
			return fmt.Errorf("linkrule: watch: %w", err)
		}
		fns = append(fns, func(ctx context.Context) {
			if m.waitServed(ctx) {
				m.logger.Info("watching LinkRule objects", slog.String("cluster", m.cfg.Cluster))
				inf.RunWithContext(ctx)
			}
		}, m.statusLoop)
	}
	loops.Start(fns...)
	return nil
}

// crdPollInterval is how often the cluster is asked whether it serves LinkRules yet.
const crdPollInterval = 5 * time.Second

// waitServed waits until the cluster serves LinkRule objects (the CRD is applied), asking every
// crdPollInterval, so that a cluster without the CRD costs one cheap request per interval and no
// watch errors. It returns false when ctx ends first.
func (m *Manager) waitServed(ctx context.Context) bool {
	logged := false
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := m.dyn.Resource(GroupVersionResource).List(lctx, metav1.ListOptions{Limit: 1})
		cancel()
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil:
			return false
		case !logged && apierrors.IsNotFound(err):
			m.logger.Info("the cluster does not serve LinkRules (apply deploy/crds); checking again every "+crdPollInterval.String(),
				slog.String("cluster", m.cfg.Cluster))
			logged = true
		case !logged:
			m.logger.Warn("cannot list LinkRules; retrying every "+crdPollInterval.String(),
				slog.String("cluster", m.cfg.Cluster), slog.Any("error", err))
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(crdPollInterval):
		}
	}
}

// Stop stops the goroutines and waits for them, or until ctx ends (its error is returned
// then). It is safe without Start.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	loops := m.loops
	m.mu.Unlock()
	if loops == nil {
		return nil
	}
	if err := loops.Stop(ctx, "linkrule"); err != nil {
		return fmt.Errorf("linkrule: stop: %w", context.Cause(ctx))
	}
	return nil
}

// every calls fn every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

func (m *Manager) reloadLoop(ctx context.Context) {
	every(ctx, m.cfg.ReloadInterval, m.reloadIfChanged)
}

// reloadIfChanged reloads the rule directory when its files changed.
func (m *Manager) reloadIfChanged(context.Context) {
	sig, err := dirSignature(m.cfg.Dir)
	m.mu.Lock()
	same := err == nil && sig == m.dirSig
	if same {
		m.dirFailing = false
	}
	m.mu.Unlock()
	if same {
		return
	}
	if err == nil {
		err = m.loadDir()
	}
	if err != nil {
		// Logged once until the directory can be read again, not every interval.
		m.mu.Lock()
		first := !m.dirFailing
		m.dirFailing = true
		m.mu.Unlock()
		if first {
			m.logger.Warn("link rules dir unreadable; keeping the loaded rules", slog.Any("error", err))
		}
	}
}

// onUpsert compiles a new or changed LinkRule object. Updates that leave the generation as it
// was (status writes, label changes) are ignored.
func (m *Manager) onUpsert(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	name := u.GetName()
	m.mu.Lock()
	prev := m.watched[name]
	if prev != nil && prev.uid == u.GetUID() && prev.generation == u.GetGeneration() {
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()

	w := &watchedRule{uid: u.GetUID(), generation: u.GetGeneration()}
	var lr LinkRule
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &lr); err != nil {
		w.err = fmt.Errorf("%w %q: %w", errInvalidRule, name, err)
	} else if w.rule, w.err = Compile(lr, "cluster", m.cfg.compileOptions()); w.err != nil {
		w.rule = nil
	}
	m.mu.Lock()
	m.watched[name] = w
	m.mu.Unlock()
	if w.rule != nil {
		m.linker.Put(setCluster, w.rule)
		m.logger.Info("link rule applied", slog.String("rule", name), slog.Int64("generation", w.generation))
		return
	}
	m.linker.Delete(setCluster, name)
	m.logger.Error("link rule rejected", slog.String("rule", name), slog.Int64("generation", w.generation), slog.Any("error", w.err))
}

func (m *Manager) onDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	m.mu.Lock()
	delete(m.watched, u.GetName())
	m.mu.Unlock()
	m.linker.Delete(setCluster, u.GetName())
	m.logger.Info("link rule removed", slog.String("rule", u.GetName()))
}

func (m *Manager) statusLoop(ctx context.Context) { every(ctx, m.cfg.StatusInterval, m.writeStatuses) }

// desiredStatus is the status of a watched rule now.
func (m *Manager) desiredStatus(w *watchedRule) Status {
	st := Status{ObservedGeneration: w.generation}
	cond := metav1.Condition{Type: ConditionReady, ObservedGeneration: w.generation}
	if w.rule != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonCompiled, "the rule compiled and is applied"
		s := w.rule.Stats()
		st.Evaluations, st.LinksMade, st.Errors, st.Truncated = s.Evaluations.Load(), s.LinksMade.Load(), s.Errors.Load(), s.Truncated.Load()
		st.LastError = clip.String(s.LastError(), 1024)
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonCompileFailed, clip.String(w.err.Error(), 4096)
	}
	st.Conditions = []metav1.Condition{cond}
	return st
}

// writeStatuses writes the status of the rules whose status changed since the last write, at
// most MaxStatusWritesPerInterval of them.
func (m *Manager) writeStatuses(ctx context.Context) {
	type job struct {
		name string
		w    *watchedRule
		st   Status
	}
	var jobs []job
	m.mu.Lock()
	// Start after the rule written last, so that busy rules do not starve the others when
	// more than MaxStatusWritesPerInterval changed.
	names := slices.Sorted(maps.Keys(m.watched))
	from, _ := slices.BinarySearch(names, m.statusCursor)
	if from < len(names) && names[from] == m.statusCursor {
		from++
	}
	names = slices.Concat(names[from:], names[:from])
	for _, name := range names {
		w := m.watched[name]
		st := m.desiredStatus(w)
		if w.written != nil && sameStatus(*w.written, st) {
			continue
		}
		cond := &st.Conditions[0]
		cond.LastTransitionTime = metav1.NewTime(m.now().UTC().Truncate(time.Second))
		if w.written != nil && len(w.written.Conditions) == 1 && w.written.Conditions[0].Status == cond.Status {
			cond.LastTransitionTime = w.written.Conditions[0].LastTransitionTime
		}
		jobs = append(jobs, job{name: name, w: w, st: st})
		if len(jobs) == m.cfg.MaxStatusWritesPerInterval {
			m.statusCursor = name
			break
		}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		err := m.patchStatus(ctx, j.name, j.w.uid, j.st)
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Written, or the object is gone or was recreated (its own events follow).
			m.mu.Lock()
			if m.watched[j.name] == j.w {
				st := j.st
				j.w.written = &st
			}
			m.mu.Unlock()
		case ctx.Err() != nil:
			return
		default:
			// Logged once per failing streak (e.g. no RBAC permission), not every interval.
			m.mu.Lock()
			first := !m.statusFailing
			m.statusFailing = true
			m.mu.Unlock()
			if first {
				m.logger.Warn("cannot write link rule status; retrying every interval", slog.String("rule", j.name), slog.Any("error", err))
			}
			continue
		}
		m.mu.Lock()
		recovered := err == nil && m.statusFailing
		if recovered {
			m.statusFailing = false
		}
		m.mu.Unlock()
		if recovered {
			m.logger.Info("link rule status written again", slog.String("rule", j.name))
		}
	}
}

func sameStatus(a, b Status) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Evaluations != b.Evaluations || a.LinksMade != b.LinksMade ||
		a.Errors != b.Errors || a.Truncated != b.Truncated || a.LastError != b.LastError || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// patchStatus merge-patches the status subresource. The UID precondition keeps the status of
// one incarnation off a recreated object.
func (m *Manager) patchStatus(ctx context.Context, name string, uid types.UID, st Status) error {
	var lastError any
	if st.LastError != "" {
		lastError = st.LastError
	}
	patch := map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status": map[string]any{
			"observedGeneration": st.ObservedGeneration,
			"conditions":         st.Conditions,
			"evaluations":        st.Evaluations,
			"linksMade":          st.LinksMade,
			"errors":             st.Errors,
			"truncated":          st.Truncated,
			"lastError":          lastError,
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = m.dyn.Resource(GroupVersionResource).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("patch status of %s: %w", name, err)
	}
	return nil
}

// ruleStatus returns the status the Manager would write for a watched rule, for tests and
// debugging; ok is false for a rule it does not know.
func (m *Manager) ruleStatus(name string) (st Status, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.watched[name]
	if !ok {
		return Status{}, false
	}
	return m.desiredStatus(w), true
}
