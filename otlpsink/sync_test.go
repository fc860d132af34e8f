package otlpsink

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/telemetry"
)

// syncer returns s as an aggregator.Syncer, failing the test when the sink is none.
func syncer(t *testing.T, s *Sink) aggregator.Syncer {
	t.Helper()
	y, ok := any(s).(aggregator.Syncer)
	require.True(t, ok, "the OTLP sink implements aggregator.Syncer")
	return y
}

// Sync sends what was exported before it at once (not after the flush interval, not waiting for
// a full batch) and returns only once a real OTLP receiver has acknowledged it: the audit queue
// acknowledges its messages after Sync, so a crash right after must lose none of their spans.
func TestSyncSendsAndWaitsForReceiver(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	got := &received{}
	startGRPCReceiver(t, lis, nil, got)
	m, mp := newMetrics()
	s, err := New(ctx, Config{Endpoint: lis.Addr().String(), FlushInterval: time.Hour, BatchSize: 512},
		telemetry.Settings{Logger: quiet, MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	defer func() { require.NoError(t, s.Stop(ctx)) }()
	y := syncer(t, s)

	sent := testSpans()
	require.NoError(t, s.Export(ctx, sent))
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, y.Sync(sctx))
	assert.Less(t, time.Since(start), 5*time.Second, "Sync does not wait for the flush interval")
	got.check(t, sent) // every span is at the receiver when Sync returns
	assert.Equal(t, int64(len(sent)), m.value(t, "kelemetry.otlp.spans.exported", ""))

	// Again, many spans over several batches.
	more := manySpans(1500)
	for i := 0; i < len(more); i += 100 {
		require.NoError(t, s.Export(ctx, more[i:i+100]))
	}
	require.NoError(t, y.Sync(sctx))
	assert.Equal(t, len(sent)+len(more), got.count())

	// Nothing exported since: Sync returns at once.
	require.NoError(t, y.Sync(sctx))
}

// While the receiver is down, Sync does not return nil: it returns ctx's error, so that the
// caller keeps its input unacknowledged. Once the receiver is back it succeeds.
func TestSyncFailsWhileReceiverDown(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	s, err := New(ctx, Config{Endpoint: addr, FlushInterval: time.Hour, RetryBackoff: 20 * time.Millisecond, Timeout: time.Second},
		telemetry.Settings{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, s.Start(ctx))
	defer func() { require.NoError(t, s.Stop(ctx)) }()
	y := syncer(t, s)

	require.NoError(t, s.Export(ctx, testSpans()))
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = y.Sync(sctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	lis, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	got := &received{}
	startGRPCReceiver(t, lis, nil, got)
	sctx2, cancel2 := context.WithTimeout(ctx, 20*time.Second)
	defer cancel2()
	require.NoError(t, y.Sync(sctx2))
	assert.Equal(t, 3, got.count())
}

// Spans the receiver refused for good make Sync fail (once), so that their input is retried
// rather than acknowledged as stored.
func TestSyncReportsDroppedSpans(t *testing.T) {
	ctx := context.Background()
	calls := 0
	exp := &recorder{fail: func(int) error {
		calls++
		if calls == 1 {
			return status.Error(codes.InvalidArgument, "bad span")
		}
		return nil
	}}
	s := newSink(t, Config{FlushInterval: time.Hour}, exp, nil)
	require.NoError(t, s.Start(ctx))
	y := syncer(t, s)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	require.NoError(t, s.Export(ctx, testSpans()))
	err := y.Sync(sctx)
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "reported at once: %v", err)

	require.NoError(t, s.Export(ctx, testSpans()))
	require.NoError(t, y.Sync(sctx), "the next batch arrived")
	batches, _, _ := exp.state()
	assert.Equal(t, []int{3}, batches)
}

// A sink not started, or stopped, cannot sync what it holds.
func TestSyncNotRunning(t *testing.T) {
	ctx := context.Background()
	s := newSink(t, Config{}, &recorder{}, nil)
	y := syncer(t, s)
	require.NoError(t, y.Sync(ctx), "nothing held")
	require.NoError(t, s.Export(ctx, testSpans()))
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.Error(t, y.Sync(sctx))
	require.NoError(t, s.Stop(ctx)) // flushes
	require.NoError(t, y.Sync(sctx), "Stop sent everything")
	require.Error(t, s.Export(ctx, testSpans()))
	require.NoError(t, y.Sync(sctx), "the refused spans were never accepted")
}
