package aggregator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/aggregatortest"
)

// syncingSink counts its syncs and fails them with err.
type syncingSink struct {
	aggregatortest.RecordingSink
	syncs int
	err   error
}

func (s *syncingSink) Sync(context.Context) error {
	s.syncs++
	return s.err
}

func TestSyncSinks(t *testing.T) {
	ctx := context.Background()
	a, b := &syncingSink{}, &syncingSink{}
	plain := &aggregatortest.RecordingSink{} // no Sync: nothing to do
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{a, plain, b}})
	require.NoError(t, e.SyncSinks(ctx))
	assert.Equal(t, 1, a.syncs)
	assert.Equal(t, 1, b.syncs)

	failed := errors.New("sync failed")
	b.err = failed
	require.ErrorIs(t, e.SyncSinks(ctx), failed)
	assert.Equal(t, 2, a.syncs, "every sink is synced even when one fails")
}

// checkingSink answers HasSpans from the spans it recorded.
type checkingSink struct {
	aggregatortest.RecordingSink
	err error
}

func (s *checkingSink) HasSpans(_ context.Context, refs []aggregator.SpanRef) ([]bool, error) {
	if s.err != nil {
		return nil, s.err
	}
	out := make([]bool, len(refs))
	for i, r := range refs {
		for _, sp := range s.Spans() {
			if sp.TraceID == r.TraceID && sp.SpanID == r.SpanID && sp.Window.Equal(r.Window) {
				out[i] = true
			}
		}
	}
	return out, nil
}

// HasEvents finds an event's span where Send placed it, in every sink that can tell; with no
// such sink (they upsert) it reports false for all.
func TestHasEvents(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 17, 9, 30, 0, time.UTC)
	sent, unsent := event(deploy, "a/ResponseComplete", at), event(deploy, "b/ResponseComplete", at)
	nextWindow := event(deploy, "a/ResponseComplete", at.Add(aggregator.DefaultWindow))
	invalid := &aggregator.Event{Source: "audit", ID: "x"}

	a, b := &checkingSink{}, &checkingSink{}
	e := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{a, b}})
	require.NoError(t, e.Send(ctx, sent))
	has, err := e.HasEvents(ctx, []*aggregator.Event{sent, unsent, nextWindow, invalid, nil})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false, false, false}, has)

	// b lost it: not stored everywhere.
	b2 := &checkingSink{}
	e2 := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{a, b2}})
	has, err = e2.HasEvents(ctx, []*aggregator.Event{sent})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, has)

	b.err = errors.New("backend down")
	_, err = e.HasEvents(ctx, []*aggregator.Event{sent})
	require.ErrorIs(t, err, b.err)

	plain := &aggregatortest.RecordingSink{}
	e3 := newEngine(t, aggregator.Config{}, aggregator.Deps{Sinks: []aggregator.Sink{plain}})
	require.NoError(t, e3.Send(ctx, sent))
	has, err = e3.HasEvents(ctx, []*aggregator.Event{sent})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, has, "an upserting sink is not asked")
}
