package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Sync (for the durable audit queue) syncs the write-ahead log: it succeeds on an open store,
// and what was exported before survives reopening.
func TestPebbleSync(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	p, err := Open(ctx, Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	var _ aggregator.Syncer = p
	require.NoError(t, p.Sync(ctx), "nothing written yet")
	obj := ref("c", "apps", "deployments", "ns", "d")
	w := time.Now().UTC().Truncate(win)
	require.NoError(t, p.Export(ctx, []*aggregator.Span{objectSpan(obj, w), eventSpan(obj, w, "1", time.Second)}))
	require.NoError(t, p.Sync(ctx))
	require.NoError(t, p.close())
	p, err = Open(ctx, Config{Dir: dir}, 0, telemetry.Settings{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.close()) }()
	objs, err := p.FindObjects(ctx, query.ObjectQuery{})
	require.NoError(t, err)
	assert.NotEmpty(t, objs)
}
