package aggregator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/aggregator/aggregatortest"
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
