package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/objdiff"
)

// Defaults for InformerJoinConfig.
const (
	defaultInformerJoinWait       = 5 * time.Second
	defaultInformerJoinMaxPending = 10_000
	defaultInformerJoinInterval   = 200 * time.Millisecond
	defaultInformerJoinClockSkew  = 500 * time.Millisecond
	defaultInformerJoinMaxClaims  = 100_000
)

// attrInformerLatency is the event attribute holding how long after the request's completion the
// informer saw the version whose diff the span carries (a Go duration, e.g. "350ms").
const attrInformerLatency = "kelemetry.diff.informer_latency"

// InformerJoinConfig configures the join of informer diffs onto audit events. The zero value
// means defaults.
type InformerJoinConfig struct {
	// Wait bounds how long after its completion (StageTimestamp) an event waits for the
	// informer to see its version (default 5s; never more than Wait from when the consumer got
	// it). An event already older than that is looked up once.
	Wait time.Duration `yaml:"wait"`
	// MaxPending bounds the events waiting at once (default 10,000); beyond it events go out at
	// once with "diff unavailable" (counted, result buffer_full).
	MaxPending int `yaml:"maxPending"`
	// Interval is how often waiting events are looked up again (default 200ms).
	Interval time.Duration `yaml:"interval"`
	// ClockSkew is how much earlier than the request's receipt (API server clock) the informer
	// (this process's clock) may seem to have seen the version a create, or a patch without a
	// resourceVersion, is joined with by time (default 500ms; see changes.Cache.Find).
	ClockSkew time.Duration `yaml:"clockSkew"`
	// MaxClaims bounds the informer records remembered as attributed to an audit event, so
	// that a write joined by time does not take them (default 100,000; kept up to 15 minutes;
	// beyond the bound the oldest are forgotten, counted).
	MaxClaims int `yaml:"maxClaims"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c InformerJoinConfig) withDefaults() InformerJoinConfig {
	if c.Wait == 0 {
		c.Wait = defaultInformerJoinWait
	}
	if c.MaxPending == 0 {
		c.MaxPending = defaultInformerJoinMaxPending
	}
	if c.Interval == 0 {
		c.Interval = defaultInformerJoinInterval
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = defaultInformerJoinClockSkew
	}
	if c.MaxClaims == 0 {
		c.MaxClaims = defaultInformerJoinMaxClaims
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c InformerJoinConfig) Validate() error {
	if c.Wait < 0 || c.MaxPending < 0 || c.Interval < 0 || c.ClockSkew < 0 || c.MaxClaims < 0 {
		return errors.New("audit consumer: informerJoin values must not be negative")
	}
	return nil
}

// InformerDeletions lists the deletions the informers recorded in one resource and namespace,
// for collection deletes without a response body; *changes.Cache implements it (and a source
// with a Local() *changes.Cache, such as the etcd-backed store, is read through it). It must
// not block.
type InformerDeletions interface {
	Deletions(q changes.DeletionQuery) (recs []changes.Record, total int)
	// Finalized finds the removal of an object marked for deletion, seen since since: the
	// write that removed its last finalizer caused it.
	Finalized(obj aggregator.ObjectKey, since time.Time) (changes.Record, bool)
}

// InformerDiffs finds what an informer recorded for an audited write; changes.Store
// (*changes.Cache, *etcdstore.Store) implements it. Find must not block.
type InformerDiffs interface {
	Find(q changes.Query) (changes.Record, bool)
}

// Informer join results, the result attribute of kelemetry.audit.consumer.informer_diffs.
const (
	joinHit         = "hit"          // found at once
	joinHitLate     = "hit_late"     // found after waiting
	joinUnavailable = "unavailable"  // not found by the deadline
	joinBufferFull  = "buffer_full"  // too many events waiting
	joinShutdown    = "shutdown"     // still waiting when the consumer stopped
	joinStale       = "not_recorded" // not found, and the event was too old to wait
)

// informerJoin attaches informer diffs to audit events that carry no response body.
//
// Design: hold (called by Consumer.Handle) looks the diff up without blocking. On a miss it hands
// the event (already converted) to a bounded pending set and returns, so the partition goroutine
// goes on with the next events, of this object and of others; a single loop looks the pending events up again
// every Interval and sends each one when its diff shows up or its deadline passes (then with a
// "diff unavailable" note). Nothing ever waits on the informer; the cost of a late informer is
// that the event's span is sent up to Wait later, possibly after spans of the same object's later
// events (spans are independent records with their own times and deterministic IDs, so the order
// in which they reach the aggregator does not matter).
type informerJoin struct {
	cfg InformerJoinConfig
	src InformerDiffs
	// format bounds the logs of the records attached.
	format objdiff.LogFormat
	// send sends an event the join held (the consumer's send).
	send func(ctx context.Context, cluster, auditID string, out *aggregator.Event)
	// sendAll sends the events of a collection delete the join held (the consumer's sendAll).
	sendAll func(ctx context.Context, cluster, auditID string, outs []*aggregator.Event)
	// dels lists the deletions the informers saw, for collection deletes (nil: src cannot).
	dels InformerDeletions

	mu      sync.Mutex
	pending []*pendingJoin
	// collections are the collection deletes waiting for the informers to see their deletions.
	collections []*pendingCollection
	// held counts the pending events of each object: a write joined by time waits behind them.
	held map[aggregator.ObjectKey]int
	// nheld counts the events held (pending, or being looked up again by the join loop, which
	// takes them out of pending meanwhile): MaxPending bounds it.
	nheld int
	// outstanding holds, per held event or collection delete, a channel closed once the join
	// sent it (settle waits on them).
	outstanding map[any]chan struct{}
	running     bool
	quit        chan struct{}
	// looping is the join loop of the current run (a new one per start: a run may outlive the
	// stop that gave up on it).
	looping *sync.WaitGroup
	// cancelLoop ends the join loop's sends: Stop calls it when its context ends first.
	cancelLoop context.CancelFunc

	results    metric.Int64Counter
	claimDrops metric.Int64Counter
	// collectionDrops counts the deletions left out of a collection delete for the bound.
	collectionDrops metric.Int64Counter
	opts            map[string]metric.MeasurementOption

	claims claimSet
}

type pendingJoin struct {
	cluster, auditID string
	q                changes.Query
	out              *aggregator.Event
	deadline         time.Time
	// byTime: joined by time (a create, or a patch without a resourceVersion), so looked up only
	// once no earlier write of the object is waiting.
	byTime bool
}

func newInformerJoin(cfg InformerJoinConfig, format objdiff.LogFormat, meter *instrument.Meter, send func(ctx context.Context, cluster, auditID string, out *aggregator.Event)) *informerJoin {
	j := &informerJoin{cfg: cfg.withDefaults(), format: format.WithDefaults(), send: send,
		opts: map[string]metric.MeasurementOption{}, held: map[aggregator.ObjectKey]int{}, outstanding: map[any]chan struct{}{}}
	j.claims = claimSet{max: j.cfg.MaxClaims, ttl: claimTTL, keys: map[changes.RecordKey]struct{}{}}
	names := []string{joinHit, joinHitLate, joinUnavailable, joinBufferFull, joinShutdown, joinStale}
	results := instrument.Sets("result", names...)
	for i, r := range names {
		j.opts[r] = metric.WithAttributeSet(results[i])
	}
	j.results = meter.Counter("kelemetry.audit.consumer.informer_diffs",
		"Writes without a response body joined with informer diffs, by result (hit, hit_late, unavailable, buffer_full, shutdown, not_recorded).", "{event}", results...)
	j.claimDrops = meter.Counter("kelemetry.audit.consumer.informer_claims_dropped",
		"Informer records forgotten as attributed to an audit event before 15 minutes, for the bound informerJoin.maxClaims.", "{record}", *attribute.EmptySet())
	j.collectionDrops = meter.Counter("kelemetry.audit.consumer.collection_deletions_dropped",
		"Deletions seen by the informers left out of a body-less deletecollection, beyond 10,000 per request.", "{object}", *attribute.EmptySet())
	return j
}

// applies says whether ev is joined with informer diffs: a write (create, update, patch, delete
// of the object itself or update/patch of its status) whose response is not the object.
func (j *informerJoin) applies(ev *auditv1.Event, info *convertInfo) bool {
	if j.src == nil || info.isObject || ev.ObjectRef == nil {
		return false
	}
	switch ev.Verb {
	case "update", "patch":
		return ev.ObjectRef.Subresource == "" || ev.ObjectRef.Subresource == "status"
	case "create", "delete":
		return ev.ObjectRef.Subresource == ""
	}
	return false
}

// setSource sets where the records are found (Deps.InformerDiffs).
func (j *informerJoin) setSource(src InformerDiffs) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.src = src
	j.dels = nil
	switch s := src.(type) {
	case InformerDeletions:
		j.dels = s
	case interface{ Local() *changes.Cache }:
		j.dels = s.Local()
	}
}

// start starts the loop that sends held events (Consumer.Start).
func (j *informerJoin) start() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running {
		return errors.New("audit consumer: already started")
	}
	if j.src == nil {
		return nil
	}
	j.running = true
	quit, looping := make(chan struct{}), &sync.WaitGroup{}
	loopCtx, cancelLoop := context.WithCancel(context.Background())
	j.quit, j.looping, j.cancelLoop = quit, looping, cancelLoop
	looping.Go(func() { j.loop(loopCtx, quit) })
	return nil
}

// stop ends the loop and sends the events still held (Consumer.Stop).
func (j *informerJoin) stop(ctx context.Context) error {
	j.mu.Lock()
	if !j.running {
		j.mu.Unlock()
		return nil
	}
	j.running = false
	stop, looping, cancelLoop := j.quit, j.looping, j.cancelLoop
	j.mu.Unlock()
	defer cancelLoop()
	// The loop sends the events still held, then ends; when ctx ends first, its sends get a
	// canceled context (they fail, counted) and Stop returns.
	stopAfter := context.AfterFunc(ctx, cancelLoop)
	defer stopAfter()
	close(stop)
	return loop.Wait(ctx, looping, "audit consumer")
}

// hold attaches the informer diff of a body-less write to out. It reports true when out is held
// for a later look-up (the join loop sends it); false means: send out now.
func (j *informerJoin) hold(ctx context.Context, cluster string, ev *auditv1.Event, out *aggregator.Event) bool {
	ref := ev.ObjectRef
	q := changes.Query{Object: out.Object.Key(), UID: ref.UID, Verb: ev.Verb, Subresource: ref.Subresource,
		RequestRV: ref.ResourceVersion, Since: out.Start.Add(-joinClockSlack), Claimed: j.claims.has}
	byTime := ev.Verb == "create" || (ev.Verb != "delete" && q.RequestRV == "")
	if byTime {
		q.Since = out.Start.Add(-j.cfg.ClockSkew)
	}
	j.mu.Lock()
	behind := byTime && j.held[q.Object] > 0
	j.mu.Unlock()
	// A write joined by time waits behind the object's earlier writes, without a look-up now.
	if !behind {
		if rec, ok := j.find(q); ok {
			j.results.Add(ctx, 1, j.opts[joinHit])
			j.attach(out, rec)
			return false
		}
	}
	now := time.Now()
	deadline := out.End.Add(j.cfg.Wait)
	if limit := now.Add(j.cfg.Wait); deadline.After(limit) {
		deadline = limit
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case (!j.running || !deadline.After(now)) && behind:
		// Not looked up above: look it up once now.
		if rec, ok := j.find(q); ok {
			j.results.Add(ctx, 1, j.opts[joinHit])
			j.attach(out, rec)
			return false
		}
		j.results.Add(ctx, 1, j.opts[joinStale])
		unavailable(out, "diff unavailable: "+notRecorded(q))
		return false
	case !j.running || !deadline.After(now):
		j.results.Add(ctx, 1, j.opts[joinStale])
		unavailable(out, "diff unavailable: "+notRecorded(q))
		return false
	case j.nheld >= j.cfg.MaxPending:
		j.results.Add(ctx, 1, j.opts[joinBufferFull])
		unavailable(out, "diff unavailable: too many events waiting for informer diffs")
		return false
	}
	p := &pendingJoin{cluster: cluster, auditID: ev.AuditID, q: q, out: out, deadline: deadline, byTime: byTime}
	j.pending = append(j.pending, p)
	j.outstanding[p] = make(chan struct{})
	j.held[q.Object]++
	j.nheld++
	return true
}

// notRecorded says what the informer did not record for q.
func notRecorded(q changes.Query) string {
	switch {
	case q.Verb == "create":
		return "the informer recorded no creation of this object since the request"
	case q.Verb != "delete" && q.RequestRV == "":
		return "the informer recorded no change of this object since the request that no other write took"
	}
	return "the informer recorded no " + q.Verb + " of this object at this resourceVersion"
}

// find looks q up and claims the record found, so that no write joined by time takes it again.
func (j *informerJoin) find(q changes.Query) (changes.Record, bool) {
	rec, ok := j.src.Find(q)
	if !ok && (q.Verb == "update" || q.Verb == "patch") && q.Subresource == "" {
		// No change: the write may have removed the last finalizer of an object marked for
		// deletion, which the API server then removed. (Like src, dels is set before any
		// event; hold calls find with j.mu held.)
		if j.dels != nil {
			rec, ok = j.dels.Finalized(q.Object, q.Since)
		}
	}
	if ok && rec.Kind != changes.KindDeletion {
		if dropped := j.claims.add(rec.Key, time.Now()); dropped > 0 {
			j.claimDrops.Add(context.Background(), int64(dropped))
		}
	}
	return rec, ok
}

// claimTTL is how long a claim is kept: longer than the informer records live by default.
const claimTTL = 15 * time.Minute

// claimSet remembers the records attributed to audit events, bounded by count and age.
type claimSet struct {
	max int
	ttl time.Duration

	mu    sync.Mutex
	keys  map[changes.RecordKey]struct{}
	order []claim // oldest first
}

type claim struct {
	key changes.RecordKey
	at  time.Time
}

func (s *claimSet) has(k changes.RecordKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[k]
	return ok
}

// add claims k at now; it returns how many claims younger than ttl were forgotten for the bound.
func (s *claimSet) add(k changes.RecordKey, now time.Time) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[k]; ok {
		return 0
	}
	n := 0
	for ; n < len(s.order) && (now.Sub(s.order[n].at) >= s.ttl || len(s.order)-n >= s.max); n++ {
		if now.Sub(s.order[n].at) < s.ttl {
			dropped++
		}
		delete(s.keys, s.order[n].key)
	}
	if n > 0 {
		clear(s.order[:n])
		s.order = s.order[n:]
	}
	s.keys[k] = struct{}{}
	s.order = append(s.order, claim{key: k, at: now})
	return dropped
}

// joinClockSlack tolerates clock skew between the API server (request times) and this process
// (informer times) when telling a deletion of this object from one of an earlier object.
const joinClockSlack = 2 * time.Second

// loop looks the held events up every Interval until stop is closed; then it sends the rest.
func (j *informerJoin) loop(ctx context.Context, stop chan struct{}) {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			j.mu.Lock()
			rest, cols := j.pending, j.collections
			j.pending, j.collections = nil, nil
			j.mu.Unlock()
			for _, p := range rest {
				j.finish(ctx, p, time.Time{}, true, true)
			}
			for _, p := range cols {
				j.finishCollection(ctx, p, true)
			}
			return
		case now := <-t.C:
			j.recheck(ctx, now)
			j.recheckCollections(ctx, now)
		}
	}
}

// recheck looks every held event up again and sends those found or past their deadline.
func (j *informerJoin) recheck(ctx context.Context, now time.Time) {
	j.mu.Lock()
	batch := j.pending
	j.pending = nil
	j.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	keep := batch[:0]
	// Objects with a write still waiting: their later writes joined by time are not looked up
	// (a record arriving during this pass must go to the earlier write).
	waiting := map[aggregator.ObjectKey]struct{}{}
	for _, p := range batch {
		_, behind := waiting[p.q.Object]
		if !j.finish(ctx, p, now, false, !(behind && p.byTime)) {
			keep = append(keep, p)
			waiting[p.q.Object] = struct{}{}
		}
	}
	j.mu.Lock()
	j.pending = append(keep, j.pending...)
	j.mu.Unlock()
}

// finish looks p up (unless lookup is false); when found, past its deadline (at now) or
// when final, it sends p and reports true.
func (j *informerJoin) finish(ctx context.Context, p *pendingJoin, now time.Time, final, lookup bool) bool {
	var rec changes.Record
	ok := false
	if lookup {
		rec, ok = j.find(p.q)
	}
	switch {
	case ok:
		j.results.Add(ctx, 1, j.opts[joinHitLate])
		j.attach(p.out, rec)
	case final:
		j.results.Add(ctx, 1, j.opts[joinShutdown])
		unavailable(p.out, "diff unavailable: shutting down before the informer saw this version")
	case !now.Before(p.deadline):
		j.results.Add(ctx, 1, j.opts[joinUnavailable])
		unavailable(p.out, fmt.Sprintf("diff unavailable: the informer did not see this %s within %s", p.q.Verb, j.cfg.Wait))
	default:
		return false
	}
	j.mu.Lock()
	if j.held[p.q.Object]--; j.held[p.q.Object] <= 0 {
		delete(j.held, p.q.Object)
	}
	j.nheld--
	j.mu.Unlock()
	j.send(ctx, p.cluster, p.auditID, p.out)
	j.release(p)
	return true
}

// release marks the held p (a *pendingJoin or *pendingCollection) sent.
func (j *informerJoin) release(p any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ch, ok := j.outstanding[p]; ok {
		close(ch)
		delete(j.outstanding, p)
	}
}

// settle waits until every event held when it was called was sent (with its diff, or with
// "diff unavailable" past its deadline: at most Wait), or until ctx ends. A queue calls it
// before it counts a batch as handled: an event held here has not reached the sinks yet.
func (j *informerJoin) settle(ctx context.Context) error {
	j.mu.Lock()
	chans := make([]chan struct{}, 0, len(j.outstanding))
	for _, ch := range j.outstanding {
		chans = append(chans, ch)
	}
	j.mu.Unlock()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("audit consumer: wait for the events held for their informer diffs: %w", ctx.Err())
		}
	}
	return nil
}

// attach adds rec's logs and attributes to out.
func (j *informerJoin) attach(out *aggregator.Event, rec changes.Record) {
	_, known := out.Attributes.Get(attrDeletion) // from a metadata-only response (convert)
	if verb, _ := out.Attributes.Get(aggregator.AttrVerb); !known && rec.Kind == changes.KindDeletion && rec.Final && (verb == "update" || verb == "patch") {
		out.Title += " (deleted: last finalizer removed)"
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrDeletion, Value: deletionCompleted})
	}
	out.Logs = append(out.Logs, rec.Logs(out.End, j.format)...)
	if rec.BaseRV != "" && rec.Kind == changes.KindChange {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: diff.AttrBaseRV, Value: rec.BaseRV})
	}
	// A final deletion record is keyed by the list that no longer had the object, not by a
	// version of the object.
	if _, has := out.Attributes.Get(aggregator.AttrNewRV); !has && rec.Key.ResourceVersion != "" && !rec.Final {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: aggregator.AttrNewRV, Value: rec.Key.ResourceVersion})
	}
	if !rec.Time.IsZero() {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: attrInformerLatency, Value: rec.Time.Sub(out.End).Round(time.Millisecond).String()})
	}
}

// unavailable notes on out why it carries no diff.
func unavailable(out *aggregator.Event, msg string) {
	out.Logs = append(out.Logs, objdiff.NoteLog(out.End, diff.OpUnavailable, msg))
}

// pendingCollection is a body-less collection delete waiting for the informers to see the
// deletions it made.
type pendingCollection struct {
	cluster, auditID string
	base             *aggregator.Event
	q                changes.DeletionQuery
	deadline         time.Time
}

// holdCollection joins a body-less collection delete (base names its resource and namespace)
// with the deletions the informers saw there from the request's receipt to Wait after its
// completion. The informers see them after the request, so it is held until then (never more
// than Wait from now), then sent as one event per object; an event too old to wait, or one that
// does not fit in MaxPending, is looked up at once. false means the join cannot (no informer
// deletions): the caller counts it.
func (j *informerJoin) holdCollection(ctx context.Context, cluster, auditID string, base *aggregator.Event) bool {
	j.mu.Lock()
	dels := j.dels
	j.mu.Unlock()
	if dels == nil {
		return false
	}
	ref := base.Object
	p := &pendingCollection{cluster: cluster, auditID: auditID, base: base,
		q: changes.DeletionQuery{Cluster: ref.Cluster, Group: ref.Group, Resource: ref.Resource, Namespace: ref.Namespace,
			Since: base.Start.Add(-joinClockSlack), Until: base.End.Add(j.cfg.Wait), Max: maxCollectionDeletions}}
	now := time.Now()
	p.deadline = p.q.Until
	if limit := now.Add(j.cfg.Wait); p.deadline.After(limit) {
		p.deadline = limit
	}
	j.mu.Lock()
	hold := j.running && p.deadline.After(now) && j.nheld < j.cfg.MaxPending
	if hold {
		j.collections = append(j.collections, p)
		j.outstanding[p] = make(chan struct{})
		j.nheld++
	}
	full := j.running && p.deadline.After(now) && !hold
	j.mu.Unlock()
	if !hold {
		if full {
			j.results.Add(ctx, 1, j.opts[joinBufferFull])
		}
		j.sendCollection(ctx, p, dels, !full)
	}
	return true
}

// recheckCollections sends the collection deletes whose deadline has passed.
func (j *informerJoin) recheckCollections(ctx context.Context, now time.Time) {
	j.mu.Lock()
	var due []*pendingCollection
	keep := j.collections[:0]
	for _, p := range j.collections {
		if now.Before(p.deadline) {
			keep = append(keep, p)
		} else {
			due = append(due, p)
		}
	}
	clear(j.collections[len(keep):])
	j.collections = keep
	j.mu.Unlock()
	for _, p := range due {
		j.finishCollection(ctx, p, false)
	}
}

// finishCollection sends a held collection delete.
func (j *informerJoin) finishCollection(ctx context.Context, p *pendingCollection, final bool) {
	j.mu.Lock()
	j.nheld--
	dels := j.dels
	j.mu.Unlock()
	if final {
		j.results.Add(ctx, 1, j.opts[joinShutdown])
	}
	j.sendCollection(ctx, p, dels, !final)
	j.release(p)
}

// sendCollection looks the deletions of p up and sends one event per object; count says whether
// the result (hit or not_recorded) is counted.
func (j *informerJoin) sendCollection(ctx context.Context, p *pendingCollection, dels InformerDeletions, count bool) {
	recs, total := dels.Deletions(p.q)
	if dropped := total - len(recs); dropped > 0 {
		j.collectionDrops.Add(ctx, int64(dropped))
	}
	if count {
		if len(recs) > 0 {
			j.results.Add(ctx, 1, j.opts[joinHit])
		} else {
			j.results.Add(ctx, 1, j.opts[joinStale])
		}
	}
	outs := make([]*aggregator.Event, len(recs))
	for i, rec := range recs {
		outs[i] = j.deletionEvent(p.base, rec, total)
	}
	j.sendAll(ctx, p.cluster, p.auditID, outs)
}
