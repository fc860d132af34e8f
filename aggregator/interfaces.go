package aggregator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Aggregator places events in their object's trace.
type Aggregator interface {
	Send(ctx context.Context, ev *Event) error
}

// SinkSyncer is an Aggregator that can make what its sinks accepted survive a crash of the
// process (the Engine is one): a durable queue counts a batch as handled only after SyncSinks.
type SinkSyncer interface {
	SyncSinks(ctx context.Context) error
}

// SinkHealthReporter is an Aggregator that tells whether its sinks take writes (the Engine is
// one): the audit webhook refuses batches while SinkHealth returns an error.
type SinkHealthReporter interface {
	SinkHealth(ctx context.Context) error
}

// Linker finds objects related to an object, e.g. its controlling owner.
//
// Concurrency: Lookup is called by the aggregator's link workers (Config.LinkWorkers goroutines),
// concurrently for different objects but never for the same object and window at once. Its ctx
// ends after Config.LinkTimeout, or when Stop gives up waiting. Name is called once, when the
// aggregator is built, and must not change.
//
// Ownership: obj.Body is shared with the event it came from and with the other linkers: Lookup
// must not modify it, nor keep it (or anything that aliases it) after returning; copy what must
// be remembered. The returned links belong to the aggregator.
//
// NewLinker builds a Linker from a function.
type Linker interface {
	Name() string
	// Lookup returns the object's links. obj.Body is nil when the source did not see the object;
	// a linker that needs it fetches it. Returning an error skips this linker for this object.
	Lookup(ctx context.Context, obj Object) ([]Link, error)
}

// IsolatedLinker is a Linker whose Lookup may wait on something slow or absent, e.g. a linker
// served by another process (package remotelinker). The engine runs it on link workers of its
// own, LinkWorkers() goroutines with a queue of Config.LinkQueueSize jobs, instead of the shared
// workers: while it waits, only its own links are delayed, and when its queue is full its jobs are
// dropped (and counted) without holding up the other linkers or Send. Its links may then be
// written before or after the other linkers' links of the same object.
type IsolatedLinker interface {
	Linker
	// LinkWorkers is the number of goroutines that run this linker's look-ups (at least 1). It
	// is called once, when the aggregator is built.
	LinkWorkers() int
}

// Decorator may change a span before it is exported. Decorators run in the order of Name().
//
// Concurrency: Decorate runs on the send path: in the goroutine that called Send (an audit
// consumer worker, the event source's worker, ...) for object and event spans, and in the link
// workers for link spans. It is called concurrently for different spans, never twice at once for
// the same span. It delays Send and every sink, so it must be fast and must not block (no network
// calls; precompute or cache).
//
// Ownership: Decorate may change the span's fields, but slices it reaches (Attributes, Logs) may
// be shared with the Event that was sent: replace them with new slices rather than changing their
// elements or appending in place. It must not keep the span after returning: the sinks own it
// then.
//
// NewDecorator builds a Decorator from a function.
type Decorator interface {
	Name() string
	Decorate(ctx context.Context, span *Span)
}

// Sink receives finished spans. A sink must tolerate receiving a span ID more than once (upsert
// or ignore): the aggregator emits root and link spans again after a restart or cache eviction.
//
// Concurrency: Export is called from the goroutines that call Send and from the link workers,
// concurrently: it must be safe for concurrent use. It runs on the send path: a sink that talks
// to a slow backend queues (as otlpsink does) instead of blocking. Its error is counted and
// returned to the caller of Send.
//
// Ownership: Export must not keep the slice, and must not modify the spans (every sink gets the
// same ones); it may keep the spans, which are not modified afterwards.
//
// SinkFunc adapts a function to a Sink.
type Sink interface {
	Export(ctx context.Context, spans []*Span) error
}

// HealthChecker is implemented by a sink that can tell whether it takes writes now, e.g. the
// embedded store on a full disk. Health returns nil when it does, otherwise the reason (the
// audit webhook then answers 503 with Retry-After, or 429 when the reason wraps ErrSinkBusy;
// /healthz reports it). It must be cheap (it
// runs on every webhook request) and safe for concurrent use. A sink that does not implement it
// counts as healthy.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Syncer is implemented by a sink whose Export may return before the spans would survive a crash
// of the process (e.g. the embedded store, whose write-ahead log is written in the background).
// Sync returns once every span Export returned for before the call would. The durable audit
// queue calls it (through Engine.SyncSinks) before it marks batches handled.
type Syncer interface {
	Sync(ctx context.Context) error
}

// SpanRef names one span of a trace and the trace's window.
type SpanRef struct {
	TraceID trace.TraceID
	SpanID  trace.SpanID
	Window  time.Time
}

// SpanChecker is implemented by a sink that stores a span written twice twice (Jaeger's
// backends append, they do not upsert) and can tell which spans it already holds, read past any
// cache. A queue that redelivers a message after a crash asks it (through Engine.HasEvents)
// whether the message's spans were written before the crash, and then does not write them
// again. A sink that upserts (the embedded and memory stores) need not implement it: writing a
// span again changes nothing there.
type SpanChecker interface {
	// HasSpans reports, for each of refs, whether the sink holds that span.
	HasSpans(ctx context.Context, refs []SpanRef) ([]bool, error)
}

// ErrSinkUnavailable is wrapped by the error of a sink that cannot take writes now but will
// again (the embedded store on a full disk): Send returns it, and the audit consumer retries the
// event with backoff instead of dropping it.
var ErrSinkUnavailable = errors.New("sink unavailable")

// ErrSinkBusy is wrapped by the error of a sink that is back-pressured (a full send queue, e.g.
// the OTLP sink while its receiver is slow or down): it takes writes again soon. It wraps
// ErrSinkUnavailable, so the audit consumer retries a refused event; from Health it makes the
// audit webhook answer 429 (too many requests) instead of 503.
var ErrSinkBusy = fmt.Errorf("sink busy: %w", ErrSinkUnavailable)

// ErrInvalidEvent is returned by Send for an event that cannot be placed in a trace.
var ErrInvalidEvent = errors.New("invalid event")

// Attribute keys written by the built-in sources. OpenTelemetry semantic conventions where they
// exist, the kelemetry. namespace for the rest.
const (
	AttrCluster   = "k8s.cluster.name"
	AttrNamespace = "k8s.namespace.name"
	AttrGroup     = "kelemetry.object.group"
	AttrVersion   = "kelemetry.object.version"
	AttrResource  = "kelemetry.object.resource"
	AttrName      = "kelemetry.object.name"
	AttrUID       = "kelemetry.object.uid"

	AttrUser            = "user.name"
	AttrUserAgent       = "user_agent.original"
	AttrStatusCode      = "http.response.status_code"
	AttrSourceIP        = "client.address"
	AttrAuditID         = "kelemetry.audit.id"
	AttrVerb            = "kelemetry.audit.verb"
	AttrSubresource     = "kelemetry.audit.subresource"
	AttrImpersonator    = "kelemetry.audit.impersonator"
	AttrProxyIPs        = "kelemetry.audit.proxy_ips"
	AttrResourceVersion = "kelemetry.audit.resource_version"
	AttrNewRV           = "kelemetry.audit.response_resource_version"

	AttrLinkCluster   = "kelemetry.link.cluster"
	AttrLinkGroup     = "kelemetry.link.group"
	AttrLinkResource  = "kelemetry.link.resource"
	AttrLinkNamespace = "kelemetry.link.namespace"
	AttrLinkName      = "kelemetry.link.name"
	AttrLinkRole      = "kelemetry.link.role"
	AttrLinkClass     = "kelemetry.link.class"
)

// OnlyBusy reports whether err is ErrSinkBusy, wraps it, or joins errors that all do: sinks that
// are only back-pressured (retry soon, 429) rather than unavailable for another reason (503).
func OnlyBusy(err error) bool {
	for err != nil {
		if err == ErrSinkBusy { //nolint:errorlint // the walk itself unwraps
			return true
		}
		if multi, ok := err.(interface{ Unwrap() []error }); ok {
			errs := multi.Unwrap()
			for _, e := range errs {
				if !OnlyBusy(e) {
					return false
				}
			}
			return len(errs) > 0
		}
		err = errors.Unwrap(err)
	}
	return false
}
