package jaeger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/jaegertest"
	"github.com/kelemetry/kelemetry/otlpsink"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// jaegerTestStore is a jaeger store writing into and reading from f; Export returns once f holds
// the spans, so that tests read their writes.
type jaegerTestStore struct {
	*Store
	f       *jaegertest.Backend
	objects map[aggregator.ObjectKey]map[time.Time]bool
}

// mark notes an object span of key in window w; it reports whether none was noted before.
func (s *jaegerTestStore) mark(key aggregator.ObjectKey, w time.Time) bool {
	if s.objects[key] == nil {
		s.objects[key] = map[time.Time]bool{}
	}
	if s.objects[key][w] {
		return false
	}
	s.objects[key][w] = true
	return true
}

func openJaegerTest(t *testing.T, f *jaegertest.Backend, mutate func(*Config)) *jaegerTestStore {
	t.Helper()
	cfg := Config{Endpoint: f.Addr(), Timeout: 2 * time.Second,
		OTLP: otlpsink.Config{Endpoint: f.Addr(), FlushInterval: 5 * time.Millisecond, RetryBackoff: 20 * time.Millisecond}}
	if mutate != nil {
		mutate(&cfg)
	}
	j, err := Open(context.Background(), cfg, aggregator.Window(win), telemetry.Settings{})
	require.NoError(t, err)
	require.NoError(t, j.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = j.Stop(ctx)
	})
	return &jaegerTestStore{Store: j, f: f}
}

// Export writes spans as the aggregator does: with an object span in every window of an object
// (the jaeger backend finds objects by them), here added for windows that have none yet.
func (s *jaegerTestStore) Export(ctx context.Context, spans []*aggregator.Span) error {
	if s.objects == nil {
		s.objects = map[aggregator.ObjectKey]map[time.Time]bool{}
	}
	for _, sp := range spans {
		if sp.Kind == aggregator.KindObject {
			s.mark(sp.Object.Key(), sp.Window)
		}
	}
	for _, sp := range spans {
		if sp.Kind != aggregator.KindObject && s.mark(sp.Object.Key(), sp.Window) {
			spans = append(spans, objectSpan(sp.Object, sp.Window))
		}
	}
	before := s.f.Spans()
	if err := s.Store.Export(ctx, spans); err != nil {
		return err
	}
	// The OTLP exporter sends in the background: poll the backend until it holds the spans.
	deadline := time.Now().Add(5 * time.Second)
	for s.f.Spans() < before+len(spans) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the backend holds %d of %d spans exported", s.f.Spans()-before, len(spans))
		}
		time.Sleep(2 * time.Millisecond) // the interval of this poll loop (deadline above)
	}
	return nil
}

// jaegerLimits is what the jaeger backend does not promise of the shared suites.
var jaegerLimits = storetest.Limits{ObjectSpansOnly: true, NoPrefixScan: true}

func otlpConfig(endpoint string) otlpsink.Config { return otlpsink.Config{Endpoint: endpoint} }

// The span builders of the shared suites.
var (
	t0         = storetest.T0
	ref        = storetest.Ref
	objectSpan = storetest.ObjectSpan
	eventSpan  = storetest.EventSpan
	export     = storetest.Export
	keys       = storetest.Keys
)

const win = storetest.Win
