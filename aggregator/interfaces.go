package aggregator

import (
	"context"
	"errors"
)

// Aggregator places events in their object's trace.
type Aggregator interface {
	Send(ctx context.Context, ev *Event) error
}

// Linker finds objects related to an object, e.g. its controlling owner.
type Linker interface {
	Name() string
	// Lookup returns the object's links. obj.Body is nil when the source did not see the object;
	// a linker that needs it fetches it. Returning an error skips this linker for this object.
	Lookup(ctx context.Context, obj Object) ([]Link, error)
}

// Decorator may change a span before it is exported. Decorators run in the order of Name().
type Decorator interface {
	Name() string
	Decorate(ctx context.Context, span *Span)
}

// Sink receives finished spans. A sink must tolerate receiving a span ID more than once (upsert
// or ignore): the aggregator emits root and link spans again after a restart or cache eviction.
// Export must not keep the slice; it may keep the spans, which are not modified afterwards.
type Sink interface {
	Export(ctx context.Context, spans []*Span) error
}

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
