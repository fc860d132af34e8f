package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kelemetry/kelemetry/diff"
	changescfg "github.com/kelemetry/kelemetry/diff/changes"
	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Defaults for Config.
const (
	defaultMaxObjects     = 200_000
	defaultMaxBytes       = 512 << 20
	defaultMaxObjectBytes = 256 << 10
	defaultPageSize       = 500
)

// defaultExclude are the resources never watched when Config.Exclude is nil.
var defaultExclude = []string{"events", "events.k8s.io/events", "coordination.k8s.io/leases"}

// Config is informer.Config of package diff/informer, the configuration a user writes, without
// its YAML keys: the same fields, so that informer.Module converts one into the other (and stops
// compiling when they differ). Its fields are documented there. The zero value means defaults.
type Config struct {
	Resources      []string
	Exclude        []string
	MaxObjects     int
	MaxBytes       int64
	MaxObjectBytes int
	PageSize       int64
	Cache          changescfg.CacheConfig
	Compare        diff.Options
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Exclude == nil {
		c.Exclude = defaultExclude
	}
	if c.MaxObjects == 0 {
		c.MaxObjects = defaultMaxObjects
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.MaxObjectBytes == 0 {
		c.MaxObjectBytes = defaultMaxObjectBytes
	}
	if c.PageSize == 0 {
		c.PageSize = defaultPageSize
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	for _, r := range append(slices.Clone(c.Resources), c.Exclude...) {
		if _, err := diff.ParseResource(r); err != nil || r == "" {
			errs = append(errs, fmt.Errorf("diff informer: bad resource %q", r))
		}
	}
	if c.MaxObjects < 0 || c.MaxBytes < 0 || c.MaxObjectBytes < 0 || c.PageSize < 0 {
		errs = append(errs, errors.New("diff informer: bounds must not be negative"))
	}
	return errors.Join(append(errs, c.Cache.Validate(), c.Compare.Validate())...)
}

// discoverer lists a cluster's API resources (discovery.DiscoveryInterface implements it).
type discoverer interface {
	ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error)
}

// Informer watches the configured resources of one cluster and records, for every new
// resourceVersion of an object, the changes from the previous one (changes.KindChange), and
// creation and deletion snapshots, in a changes.Store (a changes.Cache or etcdstore.Store). Deletion
// is recorded twice: when deletionTimestamp is first set (graceful deletion, finalizers) and when
// the object disappears.
//
// It keeps the last version of each object, without managedFields and with Secrets' data and
// redacted fields replaced by markers (as objdiff.Differ.Snapshot), within MaxObjects and MaxBytes;
// it never holds client-go's decoded objects beyond one event. The first list of each resource
// records nothing; a relist records what changed meanwhile.
//
// Each resource runs its own list+watch loop with backoff (a resource whose list fails does not
// hold up the others). Start and Stop it once.
type Informer struct {
	cluster string
	dyn     dynamic.Interface
	disc    discoverer
	cfg     Config
	differ  *objdiff.Differ
	cache   changes.Store
	logger  *slog.Logger
	now     func() time.Time

	objects atomic.Int64
	bytes   atomic.Int64

	mu       sync.Mutex
	watchers map[schema.GroupResource]*resourceWatcher
	loops    *loop.Group // the resolver and the watch loops, set by Start

	events   metric.Int64Counter
	drops    metric.Int64Counter
	eventOpt map[string]metric.MeasurementOption
	dropOpt  map[string]metric.MeasurementOption
	retry    backoff.Policy
	leading  func() bool // nil: always record
}

// meterScope is the instrumentation scope of the diff packages' metrics.
const meterScope = "github.com/kelemetry/kelemetry/diff"

// defaultRetry spaces the retries of discovery and of each resource's list+watch.
var defaultRetry = backoff.Policy{Base: time.Second, Max: time.Minute}

// Informer event results and drop reasons (metric attributes).
const (
	evChange   = "change"
	evCreation = "creation"
	evDeletion = "deletion"
	evSkipped  = "skipped"
	evError    = "error"
	evFollower = "not_leader" // seen and kept, but not recorded: another replica leads

	dropTooLarge = "object_too_large"
	dropFull     = "store_full"
)

// New builds an Informer for cluster that records into store (a *changes.Cache, or a
// *etcdstore.Store shared by replicas). dyn is required; disc is needed only when cfg.Resources is
// empty or names resources by group only. ts gives its logger and meter provider (either may be
// unset).
func New(cluster string, dyn dynamic.Interface, disc discoverer, store changes.Store, cfg Config, ts telemetry.Settings) (*Informer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dyn == nil || store == nil {
		return nil, errors.New("diff informer: nil dynamic client or cache")
	}
	if len(cfg.Resources) == 0 && disc == nil {
		return nil, errors.New("diff informer: no resources configured and no discovery client")
	}
	cfg = cfg.withDefaults()
	d, err := objdiff.New(cfg.Compare)
	if err != nil {
		return nil, err
	}
	in := &Informer{
		cluster: cluster, dyn: dyn, disc: disc, cfg: cfg, differ: d, cache: store,
		logger: ts.Log().With("component", "diff.informer", "cluster", cluster), now: time.Now,
		watchers: map[schema.GroupResource]*resourceWatcher{},
		eventOpt: map[string]metric.MeasurementOption{}, dropOpt: map[string]metric.MeasurementOption{},
		retry: defaultRetry,
	}
	results := []string{evChange, evCreation, evDeletion, evSkipped, evError, evFollower}
	resultSets := instrument.Sets("result", results...)
	for i, r := range results {
		in.eventOpt[r] = metric.WithAttributeSet(resultSets[i])
	}
	reasons := []string{dropTooLarge, dropFull}
	reasonSets := instrument.Sets("reason", reasons...)
	for i, r := range reasons {
		in.dropOpt[r] = metric.WithAttributeSet(reasonSets[i])
	}
	meter := instrument.NewMeter(ts, meterScope)
	in.events = meter.Counter("kelemetry.diff.informer.events",
		"Watch events seen by the informer diff, by result (change, creation, deletion, skipped, error, not_leader).", "{event}", resultSets...)
	in.drops = meter.Counter("kelemetry.diff.informer.drops",
		"Objects the informer diff could not keep, by reason (object_too_large, store_full).", "{object}", reasonSets...)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("diff informer: %w", err)
	}
	return in, nil
}

// SetLeading makes the Informer record into the change store only while leading returns true
// (see leader.Elector.Leading); otherwise it goes on watching and keeping the last versions, so
// that it records from the first change once it leads. Call it before Start.
func (in *Informer) SetLeading(leading func() bool) { in.leading = leading }

// put records rec unless another replica leads, and counts result.
func (w *resourceWatcher) put(ctx context.Context, rec changes.Record, result string) {
	if w.in.leading != nil && !w.in.leading() {
		w.count(ctx, evFollower)
		return
	}
	w.in.cache.Put(rec)
	w.count(ctx, result)
}

// Objects is the number of objects whose last version is kept; Bytes their total size.
func (in *Informer) Objects() int64 { return in.objects.Load() }

// Bytes is the total size of the kept object versions.
func (in *Informer) Bytes() int64 { return in.bytes.Load() }

// Start starts the Informer in the background: it resolves the resources (retrying discovery
// with backoff, so an unreachable API server does not fail the application) and runs one
// list+watch loop per resource.
func (in *Informer) Start(_ context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.loops != nil {
		return errors.New("diff informer: already started")
	}
	in.loops = &loop.Group{}
	in.loops.Start(in.run)
	return nil
}

func (in *Informer) run(ctx context.Context) {
	var gvrs []schema.GroupVersionResource
	for attempt := 0; ; attempt++ {
		var err error
		if gvrs, err = in.resolve(); err == nil {
			break
		}
		in.logger.Warn("informer diff: cannot resolve the resources; retrying", "error", err, "in", in.retry.Delay(attempt))
		if !in.retry.Sleep(ctx, attempt) {
			return
		}
	}
	in.mu.Lock()
	for _, gvr := range gvrs {
		w := &resourceWatcher{in: in, gvr: gvr, res: diff.Resource{Group: gvr.Group, Resource: gvr.Resource}, objects: map[string]*kept{}}
		in.watchers[gvr.GroupResource()] = w
		in.loops.Go(w.run) // does nothing once Stop has begun
	}
	in.mu.Unlock()
	in.logger.Info("informer diff started", "resources", len(gvrs))
}

// Stop ends the watches and waits for them, up to ctx.
func (in *Informer) Stop(ctx context.Context) error {
	in.mu.Lock()
	loops := in.loops
	in.mu.Unlock()
	if loops == nil {
		return nil
	}
	return loops.Stop(ctx, "diff informer")
}

// resolve turns the configuration into the GVRs to watch, at the preferred versions.
func (in *Informer) resolve() ([]schema.GroupVersionResource, error) {
	exclude := map[diff.Resource]struct{}{}
	for _, r := range in.cfg.Exclude {
		res, _ := diff.ParseResource(r) // validated
		exclude[res] = struct{}{}
	}
	want := map[diff.Resource]struct{}{}
	for _, r := range in.cfg.Resources {
		res, _ := diff.ParseResource(r)
		want[res] = struct{}{}
	}
	if in.disc == nil {
		return nil, errors.New("diff informer: a discovery client is needed to find the resources' versions")
	}
	groups, lists, err := in.disc.ServerGroupsAndResources()
	if len(lists) == 0 {
		if err == nil {
			err = errors.New("no API resources")
		}
		return nil, fmt.Errorf("diff informer: discovery: %w", err)
	}
	if err != nil {
		in.logger.Warn("partial discovery failure; watching the resources found", "error", err)
	}
	preferred := map[string]string{}
	for _, g := range groups {
		if g != nil {
			preferred[g.Name] = g.PreferredVersion.Version
		}
	}
	var out []schema.GroupVersionResource
	seen := map[diff.Resource]struct{}{}
	for _, l := range lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		if p, ok := preferred[gv.Group]; ok && p != "" && p != gv.Version {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			res := diff.Resource{Group: gv.Group, Resource: r.Name}
			if _, ex := exclude[res]; ex {
				continue
			}
			if _, ok := want[res]; len(want) > 0 && !ok {
				continue
			}
			if _, dup := seen[res]; dup {
				continue
			}
			seen[res] = struct{}{}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	for res := range want {
		if _, ok := seen[res]; !ok {
			in.logger.Warn("configured resource not found in discovery (or not listable and watchable)", "group", res.Group, "resource", res.Resource)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("diff informer: no resource to watch")
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		return strings.Compare(a.Group+"/"+a.Resource, b.Group+"/"+b.Resource)
	})
	return out, nil
}

// kept is the last version of one object.
type kept struct {
	rv, uid  string
	body     []byte
	deleting bool
}

// resourceWatcher runs the list+watch loop of one resource; only its goroutine touches objects.
type resourceWatcher struct {
	in      *Informer
	gvr     schema.GroupVersionResource
	res     diff.Resource
	objects map[string]*kept // "namespace/name"
	synced  bool
}

func objectName(ns, name string) string { return ns + "/" + name }

func (w *resourceWatcher) run(ctx context.Context) {
	log := w.in.logger.With("group", w.gvr.Group, "version", w.gvr.Version, "resource", w.gvr.Resource)
	attempt := 0
	rv := ""
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			rv, err = w.list(ctx)
		}
		started := time.Now()
		if err == nil {
			rv, err = w.watch(ctx, rv)
		}
		if ctx.Err() != nil {
			return
		}
		expired := err != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err))
		if expired {
			rv = "" // relist
		}
		if (err == nil || expired) && time.Since(started) >= minWatchDuration {
			attempt = 0
			continue // the watch ended normally: resume from rv, or relist
		}
		if err == nil {
			err = errors.New("watch closed at once")
		}
		log.Warn("list/watch failed; retrying", "error", err, "in", w.in.retry.Delay(attempt))
		if !w.in.retry.Sleep(ctx, attempt) {
			return
		}
		attempt++
	}
}

// list reads every object page by page and reconciles the kept versions with them.
func (w *resourceWatcher) list(ctx context.Context) (string, error) {
	seen := make(map[string]struct{}, len(w.objects))
	opts := metav1.ListOptions{Limit: w.in.cfg.PageSize}
	var rv string
	for {
		l, err := w.in.dyn.Resource(w.gvr).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("list %s: %w", w.gvr, err)
		}
		for i := range l.Items {
			u := &l.Items[i]
			name := objectName(u.GetNamespace(), u.GetName())
			seen[name] = struct{}{}
			typ := watch.Modified
			if _, known := w.objects[name]; !known {
				typ = watch.Added // on a relist: created meanwhile
			}
			w.apply(ctx, typ, u, !w.synced)
		}
		rv = l.GetResourceVersion()
		if l.GetContinue() == "" {
			break
		}
		opts.Continue = l.GetContinue()
	}
	for name, k := range w.objects {
		if _, ok := seen[name]; !ok {
			w.vanished(ctx, name, k, rv)
		}
	}
	w.synced = true
	return rv, nil
}

// watch follows changes from rv until the watch ends; it returns the last resourceVersion seen.
func (w *resourceWatcher) watch(ctx context.Context, rv string) (string, error) {
	// A server-side timeout (5-10 minutes, spread) ends watches that a silent network lost.
	timeout := int64(watchTimeout.Seconds()) + rand.Int64N(int64(watchTimeout.Seconds()))
	wi, err := w.in.dyn.Resource(w.gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		return rv, fmt.Errorf("watch %s: %w", w.gvr, err)
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return rv, nil
			}
			switch ev.Type {
			case watch.Error:
				return rv, apierrors.FromObject(ev.Object)
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				if r := u.GetResourceVersion(); r != "" {
					rv = r
				}
				if ev.Type != watch.Bookmark {
					w.apply(ctx, ev.Type, u, false)
				}
			}
		}
	}
}

const (
	watchTimeout = 5 * time.Minute
	// minWatchDuration: a watch that ends sooner without an error counts as a failure (backoff).
	minWatchDuration = time.Second
)

func (w *resourceWatcher) count(ctx context.Context, result string) {
	w.in.events.Add(ctx, 1, w.in.eventOpt[result])
}

func (w *resourceWatcher) key(ns, name, rv string) changes.RecordKey {
	return changes.RecordKey{Cluster: w.in.cluster, Group: w.gvr.Group, Resource: w.gvr.Resource, Namespace: ns, Name: name, ResourceVersion: rv}
}

// apply handles one version of an object. quiet (the first list) keeps it without recording.
func (w *resourceWatcher) apply(ctx context.Context, typ watch.EventType, u *unstructured.Unstructured, quiet bool) {
	ns, name, rv := u.GetNamespace(), u.GetName(), u.GetResourceVersion()
	oname := objectName(ns, name)
	prev := w.objects[oname]
	if typ != watch.Deleted && prev != nil && prev.rv == rv {
		w.count(ctx, evSkipped)
		return
	}
	raw, err := json.Marshal(u.Object)
	var snap []byte
	if err == nil {
		snap, err = w.in.differ.Snapshot(w.res, raw)
	}
	if err != nil {
		w.count(ctx, evError)
		w.forget(oname)
		w.in.logger.Debug("snapshot failed", "resource", w.gvr.Resource, "object", oname, "error", err)
		return
	}
	now := w.in.now()
	deleting := u.GetDeletionTimestamp() != nil
	rec := changes.Record{Key: w.key(ns, name, rv), UID: string(u.GetUID()), Time: now}
	switch {
	case typ == watch.Deleted:
		w.forget(oname)
		rec.Kind, rec.Snapshot, rec.Final = changes.KindDeletion, snap, true
		if prev != nil {
			rec.BaseRV = prev.rv
		}
		w.put(ctx, rec, evDeletion)
		return
	case prev == nil:
		// A modification of an object not kept (too large, store full, first list) has no base:
		// nothing to record unless its deletion starts.
		switch {
		case quiet:
		case deleting:
			rec.Kind, rec.Snapshot = changes.KindDeletion, snap
		case typ == watch.Added:
			rec.Kind, rec.Snapshot = changes.KindCreation, snap
		}
	default:
		diffs, err := w.in.differ.Compare(w.res, prev.body, snap)
		if err != nil {
			w.count(ctx, evError)
			w.forget(oname)
			return
		}
		rec.Kind, rec.BaseRV, rec.Changes = changes.KindChange, prev.rv, diffs
		if deleting && !prev.deleting {
			rec.Kind, rec.Snapshot = changes.KindDeletion, snap
		}
	}
	w.keep(ctx, oname, &kept{rv: rv, uid: rec.UID, body: snap, deleting: deleting})
	if rec.Kind == 0 {
		w.count(ctx, evSkipped)
		return
	}
	switch rec.Kind {
	case changes.KindChange:
		w.put(ctx, rec, evChange)
	case changes.KindCreation:
		w.put(ctx, rec, evCreation)
	default:
		w.put(ctx, rec, evDeletion)
	}
}

// vanished records the deletion of an object that a relist (at listRV) no longer returns. The
// record is keyed by the list's resourceVersion, the first version known to be without the
// object: keyed by the object's last version, it would replace the record of that version's
// change, which an audited update may not have joined yet.
func (w *resourceWatcher) vanished(ctx context.Context, oname string, k *kept, listRV string) {
	w.forget(oname)
	ns, name, _ := strings.Cut(oname, "/")
	rv := listRV
	if rv == "" || rv == k.rv {
		rv = k.rv + "-gone"
	}
	w.put(ctx, changes.Record{Key: w.key(ns, name, rv), Kind: changes.KindDeletion, UID: k.uid, BaseRV: k.rv, Snapshot: k.body, Final: true, Time: w.in.now()}, evDeletion)
}

// keep stores k as the object's last version, within the bounds.
func (w *resourceWatcher) keep(ctx context.Context, oname string, k *kept) {
	size := int64(len(k.body) + len(oname) + len(k.rv) + len(k.uid) + keptOverhead)
	if len(k.body) > w.in.cfg.MaxObjectBytes {
		w.forget(oname)
		w.in.drops.Add(ctx, 1, w.in.dropOpt[dropTooLarge])
		return
	}
	var old int64
	prev, had := w.objects[oname]
	if had {
		old = keptSize(oname, prev)
	}
	if (!had && w.in.objects.Load() >= int64(w.in.cfg.MaxObjects)) || w.in.bytes.Load()-old+size > w.in.cfg.MaxBytes {
		w.forget(oname)
		w.in.drops.Add(ctx, 1, w.in.dropOpt[dropFull])
		return
	}
	w.objects[oname] = k
	w.in.bytes.Add(size - old)
	if !had {
		w.in.objects.Add(1)
	}
}

// keptOverhead approximates the map entry, the kept struct and the string headers.
const keptOverhead = 160

func keptSize(oname string, k *kept) int64 {
	return int64(len(k.body) + len(oname) + len(k.rv) + len(k.uid) + keptOverhead)
}

func (w *resourceWatcher) forget(oname string) {
	if k, ok := w.objects[oname]; ok {
		delete(w.objects, oname)
		w.in.objects.Add(-1)
		w.in.bytes.Add(-keptSize(oname, k))
	}
}
