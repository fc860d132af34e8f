package aggregator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/aggregator/aggregatortest"
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
