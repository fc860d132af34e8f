package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/internal/repeats"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/telemetry"
)

// SourceName is the aggregator.Event Source of audit events.
const SourceName = "audit"

// Defaults for ConsumerConfig.
var (
	defaultVerbs            = []string{"create", "update", "patch", "delete", "deletecollection"}
	defaultStages           = []string{"ResponseComplete"}
	defaultExcludeResources = []string{"events", "events.k8s.io/events", "coordination.k8s.io/leases"}
)

// ConsumerConfig configures a Consumer. The zero value means defaults.
type Config struct {
	// Verbs are the request verbs kept (default create, update, patch, delete, deletecollection).
	Verbs []string `yaml:"verbs"`
	// Stages are the audit stages kept (default ResponseComplete).
	Stages []string `yaml:"stages"`
	// IgnoreImpersonation names spans after the authenticated user even when the request
	// impersonated another one.
	IgnoreImpersonation bool `yaml:"ignoreImpersonation"`
	// ExcludeResources drops events on these resources, written "resource" for the core group or
	// "group/resource". Nil means the default (events, events.k8s.io/events,
	// coordination.k8s.io/leases); an empty non-nil list excludes nothing.
	ExcludeResources []string `yaml:"excludeResources"`
	// ExcludeUserAgents drops events whose user agent contains one of these substrings.
	ExcludeUserAgents []string `yaml:"excludeUserAgents"`
	// Diff configures the audit-stream diff: the changes of each write, computed against the
	// previous version of the object seen in the stream (the stream diff keeps the last version of each object, bounded by cacheSize and maxBytes). On by default.
	Diff diff.StreamConfig `yaml:"diff"`
	// InformerJoin configures the join of informer diffs (Deps.InformerDiffs) onto writes whose
	// audit event has no response body (Metadata-level auditing).
	InformerJoin InformerJoinConfig `yaml:"informerJoin"`
	// DedupSize is how many recent audit events (cluster, audit ID, stage) the consumer remembers
	// so that a repeated delivery of one (a sender's retry, the same batch posted again) is
	// counted as filtered (reason duplicate) instead of being handled again: handling it again
	// would rewrite its span with a diff against a later version of the object. 0 means
	// defaultDedupSize; a negative value turns the check off. The oldest are forgotten first, in
	// halves: an event is remembered for at least DedupSize/2 later events and at most DedupSize
	// (kelemetry_audit_consumer_dedup_evictions_total counts the forgotten ones).
	DedupSize int `yaml:"dedupSize"`
}

// defaultDedupSize is the default ConsumerConfig.DedupSize: about 3 MB of hashes.
const defaultDedupSize = 100_000

// withDefaults returns c with unset fields set to their defaults.
func (c Config) withDefaults() Config {
	if len(c.Verbs) == 0 {
		c.Verbs = defaultVerbs
	}
	if len(c.Stages) == 0 {
		c.Stages = defaultStages
	}
	if c.ExcludeResources == nil {
		c.ExcludeResources = defaultExcludeResources
	}
	if c.DedupSize == 0 {
		c.DedupSize = defaultDedupSize
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	for _, v := range c.Verbs {
		if v == "" {
			return errors.New("audit consumer: empty verb")
		}
	}
	for _, s := range c.Stages {
		if s == "" {
			return errors.New("audit consumer: empty stage")
		}
	}
	for _, r := range c.ExcludeResources {
		if _, err := parseGroupResource(r); err != nil {
			return err
		}
	}
	for _, ua := range c.ExcludeUserAgents {
		if ua == "" {
			return errors.New("audit consumer: empty excluded user agent (it would exclude everything)")
		}
	}
	if err := c.Diff.Validate(); err != nil {
		return fmt.Errorf("audit consumer: %w", err)
	}
	return c.InformerJoin.Validate()
}

type groupResource struct{ group, resource string }

func parseGroupResource(s string) (groupResource, error) {
	group, resource, found := strings.Cut(s, "/")
	if !found {
		group, resource = "", s
	}
	if resource == "" || strings.Contains(resource, "/") || (found && group == "") {
		return groupResource{}, fmt.Errorf("audit consumer: excluded resource %q is not \"resource\" or \"group/resource\"", s)
	}
	return groupResource{group: group, resource: resource}, nil
}

// Consumer turns audit events into aggregator events and sends them to an Aggregator.
//
// It keeps the configured verbs and stages of requests that name an object, not on excluded
// resources or from excluded user agents. An event lands on the trace of the object it names; a
// request on a subresource (status, scale, binding, ...) lands on its parent object, with the
// subresource in the title and the kelemetry.audit.subresource attribute.
//
// A deletecollection names no object in its objectRef: kube-apiserver audits the whole request
// once, not the objects it deleted. It becomes an event span on the trace of every object it
// deleted or marked for deletion: the items of its response (RequestResponse level; each item is
// also the object's deletion snapshot), or, without a response, the deletions the informers saw
// in its namespace and resource around the request (Deps.InformerDiffs; joined like the informer
// diffs, without blocking). Its title has its selectors; it is counted once (sent), or as
// filtered (reason deletecollection) when it cannot be placed: failed, no object in its
// response, no response and no informers. The deletes of the namespace controller (collection
// or not) link each object to its namespace (class linkClassNamespaceDeletion), so the
// namespace's trace leads to everything its deletion removed.
//
// It composes three parts: a converter (audit event to aggregator event), the audit-stream diff
// (streamDiff, for events with a response body) and the join of informer diffs (informerJoin, for
// writes without one).
type Consumer struct {
	agg    aggregator.Aggregator
	logger *slog.Logger
	conv   converter
	// stream is the audit-stream diff (nil when disabled); join attaches informer diffs.
	stream *streamDiff
	join   *informerJoin
	// seen holds the hashes of the audit events handled lately (nil when DedupSize < 0).
	seen *repeats.Set

	counter  *instrument.FixedCounter // one point per outcome
	retries  metric.Int64Counter
	sendWarn ratelog.Limiter
	retryMin time.Duration // first backoff of a send to an unavailable sink
}

// outcome is what became of one event, the result and reason attributes of
// kelemetry.audit.consumer.events.
type outcome int

const (
	outcomeSent outcome = iota
	outcomeFilteredVerb
	outcomeFilteredStage
	outcomeFilteredNoObjectRef
	outcomeFilteredResource
	outcomeFilteredUserAgent
	outcomeFilteredDeleteCollection
	outcomeFilteredDuplicate
	outcomeInvalidEvent
	outcomeInvalidNoAuditID
	outcomeInvalidNoName
	outcomeInvalidNoTimestamp
	outcomeInvalidTimestamp
	outcomeSendError
	outcomeSendAbandoned
	numOutcomes
)

var outcomeAttrs = [numOutcomes][2]string{
	outcomeSent:                     {"sent", ""},
	outcomeFilteredVerb:             {"filtered", "verb"},
	outcomeFilteredStage:            {"filtered", "stage"},
	outcomeFilteredNoObjectRef:      {"filtered", "no_object_ref"},
	outcomeFilteredResource:         {"filtered", "resource"},
	outcomeFilteredUserAgent:        {"filtered", "user_agent"},
	outcomeFilteredDeleteCollection: {"filtered", "deletecollection"},
	outcomeFilteredDuplicate:        {"filtered", "duplicate"},
	outcomeInvalidEvent:             {"invalid", "nil_event"},
	outcomeInvalidNoAuditID:         {"invalid", "no_audit_id"},
	outcomeInvalidNoName:            {"invalid", "no_name"},
	outcomeInvalidNoTimestamp:       {"invalid", "no_timestamp"},
	outcomeInvalidTimestamp:         {"invalid", "unrepresentable_time"},
	outcomeSendError:                {"send_error", ""},
	outcomeSendAbandoned:            {"send_error", "abandoned"},
}

// Backoff of the retries of an event whose sink is unavailable (aggregator.ErrSinkUnavailable).
const (
	sendRetryFirst   = 100 * time.Millisecond
	sendRetryLongest = 5 * time.Second
)

// Deps are what a consumer needs from the rest of the application, given to New.
type Deps struct {
	// Aggregator receives the converted events (required).
	Aggregator aggregator.Aggregator
	// InformerDiffs, when set, makes the consumer attach the diffs and snapshots the informer
	// diff source recorded (changes.Store) to create, update, patch and delete events that have
	// no response body, instead of the audit-stream diff; if it also lists deletions
	// (InformerDeletions), a body-less deletecollection lands on the objects it deleted.
	//
	// How a write finds its record (changes.Cache.Find has the details): an update or patch
	// whose objectRef names the resourceVersion it was based on takes the change based on that
	// version; a delete takes the object's deletion record seen since the request; a create
	// takes the object's first creation snapshot seen since the request that no other event
	// took; a patch (or update) without a resourceVersion, as Metadata-level audit writes
	// patches, takes the object's first change seen since the request that no other event took.
	// Records taken are remembered (claimed) so that no two writes take the same one, and a
	// write joined by time waits behind the object's earlier writes still waiting, so that the
	// object's writes take their records in the order the audit stream has them.
	InformerDiffs InformerDiffs
	// Telemetry gives the logger and meter provider (either may be unset).
	Telemetry telemetry.Settings
}

// New returns a consumer that sends to d.Aggregator.
func New(cfg Config, d Deps) (*Consumer, error) {
	agg, ts := d.Aggregator, d.Telemetry
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if agg == nil {
		return nil, errors.New("audit consumer: nil aggregator")
	}
	cfg = cfg.withDefaults()
	c := &Consumer{
		agg:      agg,
		logger:   ts.Log().With("component", "audit.consumer"),
		sendWarn: ratelog.Limiter{Burst: 5, Every: 10 * time.Second},
		retryMin: sendRetryFirst,
	}
	var differ *objdiff.Differ
	if cfg.Diff.Disabled {
		d, err := objdiff.New(cfg.Diff.Compare)
		if err != nil {
			return nil, fmt.Errorf("audit consumer: %w", err)
		}
		differ = d
	} else {
		s, err := objdiff.NewStream(cfg.Diff, ts)
		if err != nil {
			return nil, fmt.Errorf("audit consumer: %w", err)
		}
		c.stream = &streamDiff{Stream: s}
		differ = s.Differ()
	}
	c.conv = newConverter(cfg, differ)
	meter := instrument.NewMeter(ts, meterName)
	outcomeSets := make([]attribute.Set, numOutcomes)
	for o, kv := range outcomeAttrs {
		attrs := []attribute.KeyValue{attribute.String("result", kv[0])}
		if kv[1] != "" {
			attrs = append(attrs, attribute.String("reason", kv[1]))
		}
		outcomeSets[o] = attribute.NewSet(attrs...)
	}
	c.counter = meter.FixedCounter("kelemetry.audit.consumer.events",
		"Audit events seen by the consumer, by result (sent, filtered, invalid, send_error) and reason "+
			"(abandoned: the sink stayed unavailable until the queue gave up, e.g. at shutdown).", "{event}", outcomeSets...)
	c.retries = meter.Counter("kelemetry.audit.consumer.send.retries",
		"Sends retried because a sink was unavailable (e.g. the store's disk is full).", "{retry}", *attribute.EmptySet())
	c.join = newInformerJoin(cfg.InformerJoin, objdiff.FormatOf(cfg.Diff), meter, func(ctx context.Context, cluster, auditID string, out *aggregator.Event) {
		c.send(ctx, cluster, auditID, out, outcomeSent)
	})
	c.join.sendAll = c.sendAll
	if d.InformerDiffs != nil {
		c.join.setSource(d.InformerDiffs)
	}
	if cfg.DedupSize > 0 {
		evictions := meter.Counter("kelemetry.audit.consumer.dedup.evictions",
			"Audit events forgotten by the repeated-delivery check (DedupSize): a repeat of one of them is handled again.", "{event}", *attribute.EmptySet())
		// The webhook's two-generation set: about 25 bytes an event, where an LRU took about 90.
		c.seen = repeats.NewSet(cfg.DedupSize, func(n int) { evictions.Add(context.Background(), int64(n)) })
	}
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("audit consumer: %w", err)
	}
	return c, nil
}

// Handle converts ev and sends it to the aggregator. It has the signature of a queue Handler.
// Dropped events and failures are counted, not returned: invalid events are logged at debug,
// aggregator errors at warn (rate-limited).
func (c *Consumer) Handle(ctx context.Context, cluster string, ev *auditv1.Event) {
	if auditv1.IsCollectionDelete(ev) {
		if oc, err := c.conv.filter(ev); oc != outcomeSent {
			if err != nil {
				c.logger.Debug("drop invalid audit event", "cluster", cluster, "error", err)
			}
			c.counter.Add(int(oc), 1)
			return
		}
		c.handleCollection(ctx, cluster, ev)
		return
	}
	// A repeat is dropped before it is converted: only events that converted to something are
	// remembered, and conversion is a function of the event, so a repeat would convert to
	// something too. The bulk of a replayed batch costs one lookup instead of a conversion.
	var key uint64
	if c.seen != nil {
		key = repeats.EventHash(cluster, ev.AuditID, ev.Stage)
		if c.seen.Has(key) {
			c.counter.Add(int(outcomeFilteredDuplicate), 1)
			return
		}
	}
	var info convertInfo
	out, oc, err := c.conv.convert(cluster, ev, &info)
	if err != nil {
		c.logger.Debug("drop invalid audit event", "cluster", cluster, "error", err)
	}
	if out != nil && c.seen != nil {
		c.seen.Put(key, 0)
	}
	if out != nil && !out.Error {
		if c.joins(ev, &info, out) {
			if c.join.hold(ctx, cluster, ev, out) {
				return // held: sent by the join loop
			}
		} else if c.stream != nil {
			c.stream.add(ctx, ev, out, &info)
		}
	}
	c.send(ctx, cluster, ev.AuditID, out, oc)
}

// repeated reports whether ev (by cluster, audit ID and stage) was handled lately, and remembers
// it. An object's events are handled one at a time (the queue partitions by object), so two
// deliveries of one event never race here.
func (c *Consumer) repeated(cluster string, ev *auditv1.Event) bool {
	if c.seen == nil {
		return false
	}
	key := repeats.EventHash(cluster, ev.AuditID, ev.Stage)
	if c.seen.Has(key) {
		return true
	}
	c.seen.Put(key, 0)
	return false
}

// Warm rebuilds the audit-stream diff's state from ev without sending anything: ev was handled
// before, by another replica (or by this one before a queue partition moved away and back). A
// queue consumer that takes a partition over calls it with the partition's recent events, in
// order, before it handles the partition's first event (natslog.WithWarmer), so that the
// first diff of each object compares against the previous version instead of saying "no
// previous version seen". Events handled by the informer join, collection deletes and
// filtered or invalid events are skipped; nothing is counted but the diff's warmed writes.
func (c *Consumer) Warm(ctx context.Context, cluster string, ev *auditv1.Event) {
	if c.stream == nil || ev == nil || auditv1.IsCollectionDelete(ev) {
		return
	}
	var info convertInfo
	out, _, err := c.conv.convert(cluster, ev, &info)
	if err != nil || out == nil || out.Error || c.joins(ev, &info, out) {
		return
	}
	c.stream.warm(ctx, ev, out, &info)
}

// joins reports whether the informer join adds out's diff: for a write without the object in
// its response, unless the response had the object's metadata (a metadata-only client's write)
// and the audit-stream diff knows the version before it, which it then diffs exactly.
func (c *Consumer) joins(ev *auditv1.Event, info *convertInfo, out *aggregator.Event) bool {
	if !c.join.applies(ev, info) {
		return false
	}
	return !info.metadataOnly || c.stream == nil || !c.stream.Knows(out.Object.Key())
}

// send sends out (when not nil) and counts oc, or send_error. While a sink is unavailable
// (aggregator.ErrSinkUnavailable: a full disk) it retries with backoff until ctx ends, holding
// the queue partition: the queue then fills and the webhook answers 429, so that the senders keep
// the events. An event given up when ctx ends is counted as send_error, reason abandoned.
func (c *Consumer) send(ctx context.Context, cluster, auditID string, out *aggregator.Event, oc outcome) {
	if out != nil {
		if err := c.sendRetrying(ctx, out); err != nil {
			oc = outcomeSendError
			if errors.Is(err, aggregator.ErrSinkUnavailable) {
				oc = outcomeSendAbandoned
			}
			if ok, suppressed := c.sendWarn.Allow(time.Now()); ok {
				c.logger.Warn("send audit event to the aggregator", "cluster", cluster, "auditID", auditID,
					"object", out.Object.String(), "error", err, "suppressed", suppressed)
			}
		}
	}
	c.counter.Add(int(oc), 1)
}

// sendRetrying sends out, again after a backoff while the error says a sink is unavailable.
func (c *Consumer) sendRetrying(ctx context.Context, out *aggregator.Event) error {
	delay := c.retryMin
	for {
		err := c.agg.Send(ctx, out)
		if err == nil || !errors.Is(err, aggregator.ErrSinkUnavailable) {
			return err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
		c.retries.Add(ctx, 1)
		delay = min(2*delay, sendRetryLongest)
	}
}

// Convert turns an audit event from cluster into an aggregator event. keep is false when the event
// is filtered out or invalid; err is set only for invalid events (wrapping
// aggregator.ErrInvalidEvent). Convert has no side effects. A deletecollection naming no object
// gives keep false: it becomes one event per object it deleted, which only Handle places.
func (c *Consumer) Convert(cluster string, ev *auditv1.Event) (out *aggregator.Event, keep bool, err error) {
	out, _, err = c.conv.convert(cluster, ev, nil)
	return out, out != nil, err
}

// Stored reports, for each of evs (from cluster), whether the aggregator's sinks already hold its
// event span (aggregator.Engine.HasEvents: asked of the sinks that keep every copy of a span,
// such as the jaeger store backend, past their caches). The NATS queue asks it about messages
// redelivered after their previous holder died without committing them, and acknowledges those
// found without handling them again. It reports false for all when the aggregator cannot tell
// (its sinks upsert: handling again is harmless), and for events that convert to nothing (filtered,
// invalid, a deletecollection naming no object).
func (c *Consumer) Stored(ctx context.Context, cluster string, evs []*auditv1.Event) ([]bool, error) {
	out := make([]bool, len(evs))
	checker, ok := c.agg.(interface {
		HasEvents(context.Context, []*aggregator.Event) ([]bool, error)
	})
	if !ok || len(evs) == 0 {
		return out, nil
	}
	conv := make([]*aggregator.Event, len(evs))
	for i, ev := range evs {
		if ev == nil {
			continue
		}
		if a, _, err := c.conv.convert(cluster, ev, nil); err == nil {
			conv[i] = a
		}
	}
	has, err := checker.HasEvents(ctx, conv)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	for i := range out {
		out[i] = conv[i] != nil && i < len(has) && has[i]
	}
	return out, nil
}

// Settle waits until the events Handle held for their informer diffs before the call were sent to
// the aggregator (at most InformerJoin.Wait), or until ctx ends. The durable and NATS queues call
// it before syncing the sinks for a batch: a held event has not reached them, and acknowledging
// its message would lose it in a crash.
func (c *Consumer) Settle(ctx context.Context) error { return c.join.settle(ctx) }

// Start starts the loop that sends events held for their informer diff. Without Start (or after
// Stop), events are looked up once and never held.
func (c *Consumer) Start(context.Context) error { return c.join.start() }

// Stop ends the join loop and sends the events still held, with "diff unavailable" unless their
// diff arrived. Stop the queue first so that no event is held afterwards.
func (c *Consumer) Stop(ctx context.Context) error { return c.join.stop(ctx) }

// meterName is the instrumentation scope of the consumer's metrics (the audit pipeline's).
const meterName = "github.com/kelemetry/kelemetry/audit"
