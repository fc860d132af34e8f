package aggregator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// flakySink fails its exports while failing is set, and reports that in Health.
type flakySink struct {
	failing atomic.Bool
	mu      sync.Mutex
	spans   []*aggregator.Span
}

var errDiskFull = errors.New("disk full")

func (s *flakySink) Export(_ context.Context, spans []*aggregator.Span) error {
	if s.failing.Load() {
		return errDiskFull
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans = append(s.spans, spans...)
	return nil
}

func (s *flakySink) Health(context.Context) error {
	if s.failing.Load() {
		return errDiskFull
	}
	return nil
}

func (s *flakySink) kinds() map[aggregator.SpanKind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[aggregator.SpanKind]int{}
	for _, sp := range s.spans {
		out[sp.Kind]++
	}
	return out
}

func TestSinkHealth(t *testing.T) {
	ctx := context.Background()
	flaky := &flakySink{}
	plain := &aggregatortest.RecordingSink{} // implements no health check: always healthy
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{plain, flaky}})
	require.NoError(t, e.SinkHealth(ctx))
	flaky.failing.Store(true)
	err := e.SinkHealth(ctx)
	require.ErrorIs(t, err, errDiskFull)
	flaky.failing.Store(false)
	require.NoError(t, e.SinkHealth(ctx))
}

// A failed export must not make the aggregator believe the object span was written: the retry
// of the same event (the audit consumer retries) writes it.
func TestFailedExportIsRetriedWhole(t *testing.T) {
	ctx := context.Background()
	flaky := &flakySink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{flaky}})
	flaky.failing.Store(true)
	ev := event(deploy, "1", base)
	require.ErrorIs(t, e.Send(ctx, ev), errDiskFull)
	flaky.failing.Store(false)
	require.NoError(t, e.Send(ctx, ev))
	got := flaky.kinds()
	assert.Equal(t, 1, got[aggregator.KindObject], "the object span is written on the retry")
	assert.Equal(t, 1, got[aggregator.KindEvent])
}

// unavailableSink refuses exports with an error wrapping ErrSinkUnavailable while failing is set.
type unavailableSink struct {
	flakySink
	refused atomic.Int32
}

func (s *unavailableSink) Export(ctx context.Context, spans []*aggregator.Span) error {
	if s.failing.Load() {
		s.refused.Add(1)
		return fmt.Errorf("queue full: %w", aggregator.ErrSinkUnavailable)
	}
	return s.flakySink.Export(ctx, spans)
}

// Link spans a sink refuses as unavailable (a full disk, a full OTLP queue) are retried until
// the sink takes them, not dropped: the link job outlives the outage.
func TestLinkSpansRetriedWhileSinkUnavailable(t *testing.T) {
	ctx := context.Background()
	sink := &unavailableSink{}
	lookup := make(chan struct{})
	linker := aggregator.NewLinker("owner", func(context.Context, aggregator.Object) ([]aggregator.Link, error) {
		<-lookup
		return []aggregator.Link{{Target: rs, Role: aggregator.RoleChild}}, nil
	})
	e := newEngine(t, aggregator.Config{LinkTimeout: 50 * time.Millisecond},
		aggregator.Deps{Sinks: []aggregator.Sink{sink}, Linkers: []aggregator.Linker{linker}})
	require.NoError(t, e.Send(ctx, event(deploy, "1", base)))

	// The sink fills up before the link is written, and stays full for longer than the link
	// timeout.
	sink.failing.Store(true)
	close(lookup)
	require.Eventually(t, func() bool { return sink.refused.Load() >= 3 }, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, sink.kinds()[aggregator.KindLink], "nothing written while the sink refuses")
	sink.failing.Store(false)

	require.Eventually(t, func() bool { return sink.kinds()[aggregator.KindLink] == 2 }, 10*time.Second, 5*time.Millisecond,
		"both link spans (forward and backward) are written once the sink takes them")
	assert.Equal(t, 2, sink.kinds()[aggregator.KindObject], "the deployment's and the new target's object spans")
}
