package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGroup(t *testing.T) {
	var g Group
	require.NoError(t, g.Stop(context.Background(), "x"), "stop without start")

	var g2 Group
	var running atomic.Int32
	fn := func(ctx context.Context) {
		running.Add(1)
		<-ctx.Done()
		running.Add(-1)
	}
	require.True(t, g2.Start(fn, fn))
	assert.False(t, g2.Start(fn), "second start does nothing")
	assert.True(t, g2.Go(fn))
	assert.True(t, g2.Running())
	require.NoError(t, g2.Stop(context.Background(), "x"))
	assert.Zero(t, running.Load(), "every goroutine returned before Stop did")
	assert.False(t, g2.Running())
	assert.False(t, g2.Start(fn), "no start after stop")
	assert.False(t, g2.Go(fn))
	require.NoError(t, g2.Stop(context.Background(), "x"), "stop twice")
}

func TestGroupStopTimeout(t *testing.T) {
	var g Group
	release := make(chan struct{})
	g.Start(func(context.Context) { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := g.Stop(ctx, "stuck worker")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "stuck worker: stop")
	close(release)
	require.NoError(t, g.Stop(context.Background(), "x"), "waits for the straggler")
}
