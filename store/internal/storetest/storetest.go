// Package storetest holds the behaviour every store backend shares, as test suites (Run,
// RunSearch) that each backend's tests run against it, and the span builders those tests use.
// Only tests import it.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
)

// Store is what the suites use of a store: package store's Store, which this package cannot
// import (store imports the backends whose tests import this package).
type Store interface {
	aggregator.Sink
	FindObjects(ctx context.Context, q query.ObjectQuery) ([]query.ObjectWindows, error)
	GetTrace(ctx context.Context, id trace.TraceID) ([]*aggregator.Span, error)
	GetTraces(ctx context.Context, ws []query.ObjectWindow) ([][]*aggregator.Span, error)
	FindTraces(ctx context.Context, q query.TraceQuery) ([]query.TraceRef, error)
	Clusters(ctx context.Context) ([]string, error)
}

// Limits names what a backend does not promise; the suites skip those checks.
type Limits struct {
	// ObjectSpansOnly: objects are found by their object spans only (the jaeger backend), so an
	// object is not found in a window holding only its events.
	ObjectSpansOnly bool
	// NoPrefixScan: FindTraces returns errors.ErrUnsupported.
	NoPrefixScan bool
}

// T0 is a window start.
var T0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// Win is the window length of the suites.
const Win = aggregator.DefaultWindow

// Ref is an object reference of version v1.
func Ref(cluster, group, resource, namespace, name string) aggregator.ObjectRef {
	return aggregator.ObjectRef{Cluster: cluster, Group: group, Version: "v1", Resource: resource, Namespace: namespace, Name: name}
}

// ObjectSpan is the root span of obj's trace in window w.
func ObjectSpan(obj aggregator.ObjectRef, w time.Time) *aggregator.Span {
	tid := aggregator.TraceIDFor(obj.Key(), w)
	return &aggregator.Span{
		TraceID: tid, SpanID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindObject, Source: "object",
		Name: obj.Resource + "/" + obj.Name, Object: obj, Window: w, Start: w, End: w.Add(Win),
	}
}

// EventSpan is an event in obj's trace in window w, starting at offset after w.
func EventSpan(obj aggregator.ObjectRef, w time.Time, id string, offset time.Duration) *aggregator.Span {
	tid := aggregator.TraceIDFor(obj.Key(), w)
	return &aggregator.Span{
		TraceID: tid, SpanID: aggregator.EventSpanID(tid, "audit", id), ParentID: aggregator.ObjectSpanID(tid),
		Kind: aggregator.KindEvent, Source: "audit", Name: "update " + id, Object: obj, Window: w,
		Start: w.Add(offset), End: w.Add(offset + time.Second),
		Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "update"}},
	}
}

// Export writes spans into s and fails the test on an error.
func Export(t *testing.T, s Store, spans ...*aggregator.Span) {
	t.Helper()
	require.NoError(t, s.Export(context.Background(), spans))
}

// Keys renders FindObjects results as "key: number of windows".
func Keys(res []query.ObjectWindows) []string {
	out := make([]string, 0, len(res))
	for _, r := range res {
		out = append(out, r.Object.Key().String()+":"+string(rune('0'+len(r.Windows))))
	}
	return out
}
