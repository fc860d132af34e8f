package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/kube"
)

// SourceName is the aggregator.Event Source of audit events.
const SourceName = "audit"

// Defaults for ConsumerConfig.
var (
	DefaultVerbs            = []string{"create", "update", "patch", "delete", "deletecollection"}
	DefaultStages           = []string{"ResponseComplete"}
	DefaultExcludeResources = []string{"events", "events.k8s.io/events", "coordination.k8s.io/leases"}
)

// ConsumerConfig configures a Consumer. The zero value means defaults.
type ConsumerConfig struct {
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
	// previous version of the object seen in the stream (see diff.Stream). On by default.
	Diff diff.StreamConfig `yaml:"diff"`
	// InformerJoin configures the join of informer diffs (SetInformerDiffs) onto writes whose
	// audit event has no response body (Metadata-level auditing).
	InformerJoin InformerJoinConfig `yaml:"informerJoin"`
}

// WithDefaults returns c with unset fields set to their defaults.
func (c ConsumerConfig) WithDefaults() ConsumerConfig {
	if len(c.Verbs) == 0 {
		c.Verbs = DefaultVerbs
	}
	if len(c.Stages) == 0 {
		c.Stages = DefaultStages
	}
	if c.ExcludeResources == nil {
		c.ExcludeResources = DefaultExcludeResources
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c ConsumerConfig) Validate() error {
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
// deletecollection names no object in its objectRef, and kube-apiserver audits the whole request
// once, not the objects it deleted, so such an event cannot be placed on any object trace: it is
// dropped and counted as filtered (reason deletecollection). A deletecollection event that does name
// an object is kept.
type Consumer struct {
	agg                 aggregator.Aggregator
	logger              *slog.Logger
	verbs               []string
	stages              []string
	ignoreImpersonation bool
	excludeResources    map[groupResource]struct{}
	excludeUserAgents   []string
	// differ redacts Secret bodies; stream is the audit-stream diff (nil when disabled).
	differ  *diff.Differ
	stream  *diff.Stream
	diffCfg diff.StreamConfig
	join    informerJoin

	counter  metric.Int64Counter
	outcomes [numOutcomes]metric.MeasurementOption
	sendWarn logLimiter
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
	outcomeInvalidEvent
	outcomeInvalidNoAuditID
	outcomeInvalidNoName
	outcomeInvalidNoTimestamp
	outcomeSendError
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
	outcomeInvalidEvent:             {"invalid", "nil_event"},
	outcomeInvalidNoAuditID:         {"invalid", "no_audit_id"},
	outcomeInvalidNoName:            {"invalid", "no_name"},
	outcomeInvalidNoTimestamp:       {"invalid", "no_timestamp"},
	outcomeSendError:                {"send_error", ""},
}

// NewConsumer returns a consumer that sends to agg. logger and mp may be nil.
func NewConsumer(cfg ConsumerConfig, agg aggregator.Aggregator, logger *slog.Logger, mp metric.MeterProvider) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if agg == nil {
		return nil, errors.New("audit consumer: nil aggregator")
	}
	cfg = cfg.WithDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	c := &Consumer{
		agg:                 agg,
		logger:              logger.With("component", "audit.consumer"),
		verbs:               slices.Clone(cfg.Verbs),
		stages:              slices.Clone(cfg.Stages),
		ignoreImpersonation: cfg.IgnoreImpersonation,
		excludeResources:    make(map[groupResource]struct{}, len(cfg.ExcludeResources)),
		excludeUserAgents:   slices.Clone(cfg.ExcludeUserAgents),
		sendWarn:            logLimiter{burst: 5, every: 10 * time.Second},
		diffCfg:             cfg.Diff,
	}
	for _, r := range cfg.ExcludeResources {
		gr, _ := parseGroupResource(r) // validated above
		c.excludeResources[gr] = struct{}{}
	}
	var err error
	if cfg.Diff.Disabled {
		if c.differ, err = diff.New(cfg.Diff.Compare); err != nil {
			return nil, fmt.Errorf("audit consumer: %w", err)
		}
	} else {
		if c.stream, err = diff.NewStream(cfg.Diff, logger, mp); err != nil {
			return nil, fmt.Errorf("audit consumer: %w", err)
		}
		c.differ = c.stream.Differ()
	}
	if c.counter, err = mp.Meter(meterName).Int64Counter("kelemetry.audit.consumer.events",
		metric.WithDescription("Audit events seen by the consumer, by result (sent, filtered, invalid, send_error) and reason."),
		metric.WithUnit("{event}")); err != nil {
		return nil, fmt.Errorf("create consumer metric: %w", err)
	}
	for o, kv := range outcomeAttrs {
		attrs := []attribute.KeyValue{attribute.String("result", kv[0])}
		if kv[1] != "" {
			attrs = append(attrs, attribute.String("reason", kv[1]))
		}
		c.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(attrs...))
	}
	if err := c.join.init(cfg.InformerJoin, mp); err != nil {
		return nil, err
	}
	return c, nil
}

// Handle converts ev and sends it to the aggregator. It has the signature of a queue Handler.
// Dropped events and failures are counted, not returned: invalid events are logged at debug,
// aggregator errors at warn (rate-limited).
func (c *Consumer) Handle(ctx context.Context, cluster string, ev *Event) {
	var info convertInfo
	out, oc, err := c.convert(cluster, ev, &info)
	if err != nil {
		c.logger.Debug("drop invalid audit event", "cluster", cluster, "error", err)
	}
	if out != nil && !out.Error {
		if c.join.applies(ev, &info) {
			if c.joinInformerDiff(ctx, cluster, ev, out) {
				return // held: sent by the join loop
			}
		} else if c.stream != nil {
			c.addDiff(ctx, ev, out, &info)
		}
	}
	c.send(ctx, cluster, ev.AuditID, out, oc)
}

// send sends out (when not nil) and counts oc, or send_error.
func (c *Consumer) send(ctx context.Context, cluster, auditID string, out *aggregator.Event, oc outcome) {
	if out != nil {
		if err := c.agg.Send(ctx, out); err != nil {
			oc = outcomeSendError
			if ok, suppressed := c.sendWarn.allow(time.Now()); ok {
				c.logger.Warn("send audit event to the aggregator", "cluster", cluster, "auditID", auditID,
					"object", out.Object.String(), "error", err, "suppressed", suppressed)
			}
		}
	}
	c.counter.Add(ctx, 1, c.outcomes[oc])
}

// Convert turns an audit event from cluster into an aggregator event. keep is false when the event
// is filtered out or invalid; err is set only for invalid events (wrapping
// aggregator.ErrInvalidEvent). Convert has no side effects.
func (c *Consumer) Convert(cluster string, ev *Event) (out *aggregator.Event, keep bool, err error) {
	out, _, err = c.convert(cluster, ev, nil)
	return out, out != nil, err
}

// convertInfo is what convert learnt about the response, for the audit-stream diff.
type convertInfo struct {
	meta     bodyMeta
	isObject bool
}

// addDiff adds the audit-stream diff of a successful write to out: diff or snapshot logs, see
// diff.Stream. It never waits.
func (c *Consumer) addDiff(ctx context.Context, ev *Event, out *aggregator.Event, info *convertInfo) {
	ref := ev.ObjectRef
	res := c.stream.Observe(ctx, diff.Write{
		Object:                 out.Object.ObjectRef,
		Verb:                   ev.Verb,
		Subresource:            ref.Subresource,
		RequestResourceVersion: ref.ResourceVersion,
		Request:                ev.RequestObject,
		Response:               ev.ResponseObject,
		Snapshot:               out.Object.Body,
		IsObject:               info.isObject,
		ResourceVersion:        info.meta.resourceVersion,
		Time:                   out.End,
	})
	if len(res.Logs) > 0 {
		out.Logs = append(out.Logs, res.Logs...)
	}
	if len(res.Attributes) > 0 {
		out.Attributes = append(out.Attributes, res.Attributes...)
	}
}

func (c *Consumer) convert(cluster string, ev *Event, info *convertInfo) (*aggregator.Event, outcome, error) {
	if ev == nil {
		return nil, outcomeInvalidEvent, fmt.Errorf("%w: nil audit event", aggregator.ErrInvalidEvent)
	}
	if !slices.Contains(c.verbs, ev.Verb) {
		return nil, outcomeFilteredVerb, nil
	}
	if !slices.Contains(c.stages, ev.Stage) {
		return nil, outcomeFilteredStage, nil
	}
	ref := ev.ObjectRef
	if ref == nil {
		return nil, outcomeFilteredNoObjectRef, nil
	}
	if _, ok := c.excludeResources[groupResource{ref.APIGroup, ref.Resource}]; ok {
		return nil, outcomeFilteredResource, nil
	}
	for _, ua := range c.excludeUserAgents {
		if strings.Contains(ev.UserAgent, ua) {
			return nil, outcomeFilteredUserAgent, nil
		}
	}
	if ev.Verb == "deletecollection" && ref.Name == "" {
		return nil, outcomeFilteredDeleteCollection, nil
	}
	if ev.AuditID == "" {
		return nil, outcomeInvalidNoAuditID, fmt.Errorf("%w: audit event without auditID", aggregator.ErrInvalidEvent)
	}

	// The response body, if it is the object itself (not a Status, Scale, Binding, ...).
	var meta bodyMeta
	isObject := false
	if len(ev.ResponseObject) > 0 {
		meta, isObject = responseIsObject(ref, ev.ResponseObject)
	}
	obj := aggregator.Object{ObjectRef: aggregator.ObjectRef{
		Cluster:   cluster,
		Group:     ref.APIGroup,
		Version:   ref.APIVersion,
		Resource:  ref.Resource,
		Namespace: ref.Namespace,
		Name:      ref.Name,
		UID:       ref.UID,
	}}
	if isObject {
		// A create with generateName has no name in its objectRef: the response has it.
		if obj.Name == "" {
			obj.Name = meta.name
		}
		if obj.Namespace == "" {
			obj.Namespace = meta.namespace
		}
		if obj.UID == "" {
			obj.UID = meta.uid
		}
		// A copy: decoded events alias the whole input line or webhook body, request object
		// included, which must not stay in memory for as long as the body is kept. The copy is
		// the diff snapshot: no managedFields, Secrets' data and redacted fields hidden.
		if snap, err := c.differ.Snapshot(diff.Resource{Group: ref.APIGroup, Resource: ref.Resource}, ev.ResponseObject); err == nil {
			obj.Body = snap
		} else {
			obj.Body = bytes.Clone(ev.ResponseObject)
		}
		obj.MetaHash = meta.metaHash
	}
	if info != nil {
		info.meta, info.isObject = meta, isObject
	}
	if obj.Name == "" {
		return nil, outcomeInvalidNoName, fmt.Errorf("%w: audit event %s (%s %s) names no object",
			aggregator.ErrInvalidEvent, ev.AuditID, ev.Verb, ref.Resource)
	}

	start, end := ev.RequestReceivedTimestamp, ev.StageTimestamp
	switch {
	case start.IsZero() && end.IsZero():
		return nil, outcomeInvalidNoTimestamp, fmt.Errorf("%w: audit event %s has no timestamps",
			aggregator.ErrInvalidEvent, ev.AuditID)
	case start.IsZero():
		start = end
	case end.IsZero() || end.Before(start):
		end = start
	}

	code := 0
	if ev.ResponseStatus != nil {
		code = int(ev.ResponseStatus.Code)
	}
	user := ev.User.Username
	impersonator := ""
	if imp := ev.ImpersonatedUser; imp != nil && imp.Username != "" && !c.ignoreImpersonation {
		user, impersonator = imp.Username, ev.User.Username
	}

	out := &aggregator.Event{
		Object: obj,
		Source: SourceName,
		ID:     ev.AuditID + "/" + ev.Stage,
		Title:  title(user, ev.Verb, ref.Subresource, code),
		Start:  start,
		End:    end,
		Error:  code >= 300,
	}

	attrs := make(aggregator.Attrs, 0, 11)
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrAuditID, Value: ev.AuditID})
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrUser, Value: user})
	if impersonator != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrImpersonator, Value: impersonator})
	}
	if ev.UserAgent != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrUserAgent, Value: ev.UserAgent})
	}
	if ev.ResponseStatus != nil {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrStatusCode, Value: strconv.Itoa(code)})
	}
	if len(ev.SourceIPs) > 0 {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrSourceIP, Value: ev.SourceIPs[0]})
		if len(ev.SourceIPs) > 1 {
			attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrProxyIPs, Value: strings.Join(ev.SourceIPs[1:], ",")})
		}
	}
	attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrVerb, Value: ev.Verb})
	if ref.Subresource != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrSubresource, Value: ref.Subresource})
	}
	if ref.ResourceVersion != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrResourceVersion, Value: ref.ResourceVersion})
	}
	if isObject && meta.resourceVersion != "" {
		attrs = append(attrs, aggregator.Attr{Key: aggregator.AttrNewRV, Value: meta.resourceVersion})
	}
	out.Attributes = attrs

	if out.Error {
		out.Logs = errorLogs(ev.ResponseStatus, code, end)
	}
	return out, outcomeSent, nil
}

// title is "<user> <verb>[ <subresource>][ (<status text>)]", the status text only for codes of 300
// and above.
func title(user, verb, subresource string, code int) string {
	if user == "" {
		user = "unknown"
	}
	var b strings.Builder
	b.Grow(len(user) + len(verb) + len(subresource) + 24)
	b.WriteString(user)
	b.WriteByte(' ')
	b.WriteString(verb)
	if subresource != "" {
		b.WriteByte(' ')
		b.WriteString(subresource)
	}
	if code >= 300 {
		b.WriteString(" (")
		b.WriteString(statusText(code))
		b.WriteByte(')')
	}
	return b.String()
}

func statusText(code int) string {
	if s := http.StatusText(code); s != "" {
		return s
	}
	return strconv.Itoa(code)
}

// errorLogs describes a failed request: its status reason and message, then one log per cause.
func errorLogs(st *Status, code int, at time.Time) []aggregator.Log {
	if st == nil {
		return []aggregator.Log{{Time: at, Type: aggregator.LogTypeError, Message: statusText(code)}}
	}
	reason := st.Reason
	if reason == "" {
		reason = statusText(code)
	}
	var causes []StatusCause
	if st.Details != nil {
		causes = st.Details.Causes
	}
	logs := make([]aggregator.Log, 0, 1+len(causes))
	logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeError, Message: joinNonEmpty(reason, st.Message)})
	for _, cause := range causes {
		logs = append(logs, aggregator.Log{Time: at, Type: aggregator.LogTypeCause,
			Message: joinNonEmpty(cause.Field, cause.Type, cause.Message)})
	}
	return logs
}

func joinNonEmpty(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// responseIsObject decodes the type and metadata of a response body and reports whether the body
// is the object ref names: not a Status, Scale, Binding or other subresource type, in the same API
// group, with the same name and namespace (when ref has them). A subresource response counts only
// for "status", whose requests return the whole object. A delete that returns the object (it has
// finalizers, or the server answers 200 with it) counts too.
func responseIsObject(ref *ObjectReference, body []byte) (bodyMeta, bool) {
	if ref.Subresource != "" && ref.Subresource != "status" {
		return bodyMeta{}, false
	}
	meta, err := decodeBodyMeta(body)
	if err != nil {
		return bodyMeta{}, false
	}
	if !kube.IsObjectKind(meta.kind) || meta.kind == "" || meta.name == "" {
		return bodyMeta{}, false
	}
	group, _, found := strings.Cut(meta.apiVersion, "/")
	if !found {
		group = "" // core group: "v1"
	}
	if group != ref.APIGroup {
		return bodyMeta{}, false
	}
	if (ref.Name != "" && meta.name != ref.Name) || (ref.Namespace != "" && meta.namespace != ref.Namespace) ||
		(ref.UID != "" && meta.uid != "" && meta.uid != ref.UID) {
		return bodyMeta{}, false
	}
	return meta, true
}

// bodyMeta is the part of an object body the consumer reads.
type bodyMeta struct {
	apiVersion, kind                       string
	name, namespace, uid, resourceVersion  string
	seenAPIVersion, seenKind, seenMetadata bool
	// metaHash fingerprints metadata.labels, annotations and ownerReferences (non-zero once
	// metadata was read): the aggregator runs linkers again when it changes.
	metaHash uint64
}

// metaSeed seeds metaHash; fingerprints are compared within one process only.
var metaSeed = maphash.MakeSeed()

type metaDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var metaDecoders = sync.Pool{New: func() any { return new(metaDecoder) }}

// decodeBodyMeta reads apiVersion, kind and metadata.{name,namespace,uid,resourceVersion} from a
// JSON object, skipping every other member without decoding it, and stops as soon as it has the
// three top-level members (kube-apiserver writes them first, so spec and status are not scanned).
func decodeBodyMeta(body []byte) (bodyMeta, error) {
	md := metaDecoders.Get().(*metaDecoder)
	defer func() {
		md.buf = bytes.Buffer{} // drop the references to the body
		md.dec.Reset(&md.buf)
		metaDecoders.Put(md)
	}()
	// The decoder parses a bytes.Buffer in place, without copying the body.
	md.buf = *bytes.NewBuffer(body)
	md.dec.Reset(&md.buf)
	d := &md.dec

	var m bodyMeta
	tok, err := d.ReadToken()
	if err != nil {
		return m, err
	}
	if tok.Kind() != '{' {
		return m, errors.New("response object is not a JSON object")
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return m, err
		}
		switch {
		case isName(name, "apiVersion"):
			m.apiVersion, err = readString(d)
			m.seenAPIVersion = true
		case isName(name, "kind"):
			m.kind, err = readString(d)
			m.seenKind = true
		case isName(name, "metadata"):
			err = readMetadata(d, &m)
			m.seenMetadata = true
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return m, err
		}
		if m.seenAPIVersion && m.seenKind && m.seenMetadata {
			return m, nil
		}
	}
	return m, nil
}

func readMetadata(d *jsontext.Decoder, m *bodyMeta) error {
	if d.PeekKind() != '{' {
		return d.SkipValue()
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	m.metaHash = 1
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return err
		}
		switch {
		case isName(name, "labels"), isName(name, "annotations"), isName(name, "ownerReferences"):
			var v jsontext.Value
			if v, err = d.ReadValue(); err == nil {
				m.metaHash = (m.metaHash*1099511628211^maphash.Bytes(metaSeed, name))*1099511628211 ^ maphash.Bytes(metaSeed, v)
				if m.metaHash == 0 {
					m.metaHash = 1
				}
			}
		case isName(name, "name"):
			m.name, err = readString(d)
		case isName(name, "namespace"):
			m.namespace, err = readString(d)
		case isName(name, "uid"):
			m.uid, err = readString(d)
		case isName(name, "resourceVersion"):
			m.resourceVersion, err = readString(d)
		default:
			err = d.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := d.ReadToken() // '}'
	return err
}

// isName reports whether the raw JSON string v (quotes included) is want.
func isName(v jsontext.Value, want string) bool {
	if len(v) == len(want)+2 && string(v[1:len(v)-1]) == want {
		return true
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return false
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return err == nil && string(s) == want
}

// readString reads a string value; any other value is skipped and reads as "".
func readString(d *jsontext.Decoder) (string, error) {
	if d.PeekKind() != '"' {
		return "", d.SkipValue()
	}
	v, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return string(s), err
}

// Defaults for InformerJoinConfig.
const (
	DefaultInformerJoinWait       = 5 * time.Second
	DefaultInformerJoinMaxPending = 10_000
	DefaultInformerJoinInterval   = 200 * time.Millisecond
	DefaultInformerJoinClockSkew  = 500 * time.Millisecond
	DefaultInformerJoinMaxClaims  = 100_000
)

// AttrInformerLatency is the event attribute holding how long after the request's completion the
// informer saw the version whose diff the span carries (a Go duration, e.g. "350ms").
const AttrInformerLatency = "kelemetry.diff.informer_latency"

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
	// resourceVersion, is joined with by time (default 500ms; see diff.ChangeCache.Find).
	ClockSkew time.Duration `yaml:"clockSkew"`
	// MaxClaims bounds the informer records remembered as attributed to an audit event, so
	// that a write joined by time does not take them (default 100,000; kept up to 15 minutes;
	// beyond the bound the oldest are forgotten, counted).
	MaxClaims int `yaml:"maxClaims"`
}

// WithDefaults returns c with zero fields set to their defaults.
func (c InformerJoinConfig) WithDefaults() InformerJoinConfig {
	if c.Wait == 0 {
		c.Wait = DefaultInformerJoinWait
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultInformerJoinMaxPending
	}
	if c.Interval == 0 {
		c.Interval = DefaultInformerJoinInterval
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultInformerJoinClockSkew
	}
	if c.MaxClaims == 0 {
		c.MaxClaims = DefaultInformerJoinMaxClaims
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

// InformerDiffs finds what an informer recorded for an audited write; diff.Changes
// (*diff.ChangeCache, *diff.EtcdCache) implements it. Find must not block.
type InformerDiffs interface {
	Find(q diff.Query) (diff.Record, bool)
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
// Design: Handle looks the diff up without blocking. On a miss it hands the event (already
// converted) to a bounded pending set and returns, so the partition goroutine goes on with the
// next events, of this object and of others; a single loop looks the pending events up again
// every Interval and sends each one when its diff shows up or its deadline passes (then with a
// "diff unavailable" note). Nothing ever waits on the informer; the cost of a late informer is
// that the event's span is sent up to Wait later, possibly after spans of the same object's later
// events (spans are independent records with their own times and deterministic IDs, so the order
// in which they reach the aggregator does not matter).
type informerJoin struct {
	cfg InformerJoinConfig
	src InformerDiffs

	mu      sync.Mutex
	pending []*pendingJoin
	// held counts the pending events of each object: a write joined by time waits behind them.
	held map[aggregator.ObjectKey]int
	// nheld counts the events held (pending, or being looked up again by the join loop, which
	// takes them out of pending meanwhile): MaxPending bounds it.
	nheld   int
	running bool
	stop    chan struct{}
	done    chan struct{}
	// cancelLoop ends the join loop's sends: Stop calls it when its context ends first.
	cancelLoop context.CancelFunc

	results    metric.Int64Counter
	claimDrops metric.Int64Counter
	opts       map[string]metric.MeasurementOption

	claims claimSet
}

type pendingJoin struct {
	cluster, auditID string
	q                diff.Query
	out              *aggregator.Event
	deadline         time.Time
	// byTime: joined by time (a create, or a patch without a resourceVersion), so looked up only
	// once no earlier write of the object is waiting.
	byTime bool
}

func (j *informerJoin) init(cfg InformerJoinConfig, mp metric.MeterProvider) error {
	j.cfg = cfg.WithDefaults()
	j.opts = map[string]metric.MeasurementOption{}
	j.held = map[aggregator.ObjectKey]int{}
	j.claims = claimSet{max: j.cfg.MaxClaims, ttl: claimTTL, keys: map[diff.RecordKey]struct{}{}}
	var err error
	if j.results, err = mp.Meter(meterName).Int64Counter("kelemetry.audit.consumer.informer_diffs",
		metric.WithDescription("Writes without a response body joined with informer diffs, by result (hit, hit_late, unavailable, buffer_full, shutdown, not_recorded)."),
		metric.WithUnit("{event}")); err != nil {
		return fmt.Errorf("create consumer metric: %w", err)
	}
	if j.claimDrops, err = mp.Meter(meterName).Int64Counter("kelemetry.audit.consumer.informer_claims_dropped",
		metric.WithDescription("Informer records forgotten as attributed to an audit event before 15 minutes, for the bound informerJoin.maxClaims."),
		metric.WithUnit("{record}")); err != nil {
		return fmt.Errorf("create consumer metric: %w", err)
	}
	for _, r := range []string{joinHit, joinHitLate, joinUnavailable, joinBufferFull, joinShutdown, joinStale} {
		j.opts[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", r)))
	}
	return nil
}

// applies says whether ev is joined with informer diffs: a write (create, update, patch, delete
// of the object itself or update/patch of its status) whose response is not the object.
func (j *informerJoin) applies(ev *Event, info *convertInfo) bool {
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

// SetInformerDiffs makes the consumer attach the diffs and snapshots src recorded (see
// diff.Informer) to create, update, patch and delete events that have no response body, instead
// of the audit-stream diff. Call it before Start and before any event is handled.
//
// How a write finds its record (diff.ChangeCache.Find has the details): an update or patch whose
// objectRef names the resourceVersion it was based on takes the change based on that version; a
// delete takes the object's deletion record seen since the request; a create takes the object's
// first creation snapshot seen since the request that no other event took; a patch (or update)
// without a resourceVersion, as Metadata-level audit writes patches, takes the object's first
// change seen since the request that no other event took. Records taken are remembered (claimed)
// so that no two writes take the same one, and a write joined by time waits behind the object's
// earlier writes still waiting, so that the object's writes take their records in the order the
// audit stream has them.
func (c *Consumer) SetInformerDiffs(src InformerDiffs) {
	c.join.mu.Lock()
	defer c.join.mu.Unlock()
	c.join.src = src
}

// Start starts the loop that sends events held for their informer diff. Without Start (or after
// Stop), events are looked up once and never held.
func (c *Consumer) Start(context.Context) error {
	j := &c.join
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running {
		return errors.New("audit consumer: already started")
	}
	if j.src == nil {
		return nil
	}
	j.running = true
	j.stop, j.done = make(chan struct{}), make(chan struct{})
	var loopCtx context.Context
	loopCtx, j.cancelLoop = context.WithCancel(context.Background())
	go c.joinLoop(loopCtx, j.stop, j.done)
	return nil
}

// Stop ends the join loop and sends the events still held, with "diff unavailable" unless their
// diff arrived. Stop the queue first so that no event is held afterwards.
func (c *Consumer) Stop(ctx context.Context) error {
	j := &c.join
	j.mu.Lock()
	if !j.running {
		j.mu.Unlock()
		return nil
	}
	j.running = false
	stop, done, cancelLoop := j.stop, j.done, j.cancelLoop
	j.mu.Unlock()
	defer cancelLoop()
	// The loop sends the events still held, then ends; when ctx ends first, its sends get a
	// canceled context (they fail, counted) and Stop returns.
	stopAfter := context.AfterFunc(ctx, cancelLoop)
	defer stopAfter()
	close(stop)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit consumer: stop: %w", ctx.Err())
	}
}

// joinInformerDiff attaches the informer diff of a body-less write to out. It reports true when
// out is held for a later look-up (the join loop sends it); false means: send out now.
func (c *Consumer) joinInformerDiff(ctx context.Context, cluster string, ev *Event, out *aggregator.Event) bool {
	j := &c.join
	ref := ev.ObjectRef
	q := diff.Query{Object: out.Object.Key(), UID: ref.UID, Verb: ev.Verb, Subresource: ref.Subresource,
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
			c.attachRecord(out, rec)
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
			c.attachRecord(out, rec)
			return false
		}
		j.results.Add(ctx, 1, j.opts[joinStale])
		c.unavailable(out, "diff unavailable: "+notRecorded(q))
		return false
	case !j.running || !deadline.After(now):
		j.results.Add(ctx, 1, j.opts[joinStale])
		c.unavailable(out, "diff unavailable: "+notRecorded(q))
		return false
	case j.nheld >= j.cfg.MaxPending:
		j.results.Add(ctx, 1, j.opts[joinBufferFull])
		c.unavailable(out, "diff unavailable: too many events waiting for informer diffs")
		return false
	}
	j.pending = append(j.pending, &pendingJoin{cluster: cluster, auditID: ev.AuditID, q: q, out: out, deadline: deadline, byTime: byTime})
	j.held[q.Object]++
	j.nheld++
	return true
}

// notRecorded says what the informer did not record for q.
func notRecorded(q diff.Query) string {
	switch {
	case q.Verb == "create":
		return "the informer recorded no creation of this object since the request"
	case q.Verb != "delete" && q.RequestRV == "":
		return "the informer recorded no change of this object since the request that no other write took"
	}
	return "the informer recorded no " + q.Verb + " of this object at this resourceVersion"
}

// find looks q up and claims the record found, so that no write joined by time takes it again.
func (j *informerJoin) find(q diff.Query) (diff.Record, bool) {
	rec, ok := j.src.Find(q)
	if ok && rec.Kind != diff.KindDeletion {
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
	keys  map[diff.RecordKey]struct{}
	order []claim // oldest first
}

type claim struct {
	key diff.RecordKey
	at  time.Time
}

func (s *claimSet) has(k diff.RecordKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[k]
	return ok
}

// add claims k at now; it returns how many claims younger than ttl were forgotten for the bound.
func (s *claimSet) add(k diff.RecordKey, now time.Time) (dropped int) {
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

func (c *Consumer) joinLoop(ctx context.Context, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.join.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			j := &c.join
			j.mu.Lock()
			rest := j.pending
			j.pending = nil
			j.mu.Unlock()
			for _, p := range rest {
				c.finishJoin(ctx, p, time.Time{}, true, true)
			}
			return
		case now := <-t.C:
			c.recheck(ctx, now)
		}
	}
}

// recheck looks every held event up again and sends those found or past their deadline.
func (c *Consumer) recheck(ctx context.Context, now time.Time) {
	j := &c.join
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
		if !c.finishJoin(ctx, p, now, false, !(behind && p.byTime)) {
			keep = append(keep, p)
			waiting[p.q.Object] = struct{}{}
		}
	}
	j.mu.Lock()
	j.pending = append(keep, j.pending...)
	j.mu.Unlock()
}

// finishJoin looks p up (unless lookup is false); when found, past its deadline (at now) or
// when final, it sends p and reports true.
func (c *Consumer) finishJoin(ctx context.Context, p *pendingJoin, now time.Time, final, lookup bool) bool {
	j := &c.join
	var rec diff.Record
	ok := false
	if lookup {
		rec, ok = j.find(p.q)
	}
	switch {
	case ok:
		j.results.Add(ctx, 1, j.opts[joinHitLate])
		c.attachRecord(p.out, rec)
	case final:
		j.results.Add(ctx, 1, j.opts[joinShutdown])
		c.unavailable(p.out, "diff unavailable: shutting down before the informer saw this version")
	case !now.Before(p.deadline):
		j.results.Add(ctx, 1, j.opts[joinUnavailable])
		c.unavailable(p.out, fmt.Sprintf("diff unavailable: the informer did not see this %s within %s", p.q.Verb, j.cfg.Wait))
	default:
		return false
	}
	j.mu.Lock()
	if j.held[p.q.Object]--; j.held[p.q.Object] <= 0 {
		delete(j.held, p.q.Object)
	}
	j.nheld--
	j.mu.Unlock()
	c.send(ctx, p.cluster, p.auditID, p.out, outcomeSent)
	return true
}

func (c *Consumer) attachRecord(out *aggregator.Event, rec diff.Record) {
	out.Logs = append(out.Logs, rec.Logs(out.End, c.diffCfg)...)
	if rec.BaseRV != "" && rec.Kind == diff.KindChange {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: diff.AttrBaseRV, Value: rec.BaseRV})
	}
	// A final deletion record is keyed by the list that no longer had the object, not by a
	// version of the object.
	if _, has := out.Attributes.Get(aggregator.AttrNewRV); !has && rec.Key.ResourceVersion != "" && !rec.Final {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: aggregator.AttrNewRV, Value: rec.Key.ResourceVersion})
	}
	if !rec.Time.IsZero() {
		out.Attributes = append(out.Attributes, aggregator.Attr{Key: AttrInformerLatency, Value: rec.Time.Sub(out.End).Round(time.Millisecond).String()})
	}
}

func (c *Consumer) unavailable(out *aggregator.Event, msg string) {
	out.Logs = append(out.Logs, aggregator.Log{Time: out.End, Type: aggregator.LogTypeDiff, Message: msg,
		Attributes: aggregator.Attrs{{Key: diff.AttrOp, Value: diff.OpUnavailable}}})
}
