package replay

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunnerReplaysInOrderAndReports(t *testing.T) {
	var seen []string
	r := New("test replay", []string{"a", "bad", "c"}, func(_ context.Context, f string, _ *Tracker[int]) (int, error) {
		seen = append(seen, f)
		if f == "bad" {
			return 0, errors.New("broken line")
		}
		return len(f), nil
	}, nil)
	require.NoError(t, r.Start(context.Background()))
	<-r.Done()
	stats, err := r.Status()
	assert.Equal(t, []string{"a", "bad", "c"}, seen, "a failing file does not stop the others")
	var got []int
	for _, p := range stats {
		assert.True(t, p.Done)
		got = append(got, p.Stats)
	}
	assert.Equal(t, []int{1, 0, 1}, got)
	assert.ErrorContains(t, err, "test replay bad: broken line")
	require.NoError(t, r.Stop(context.Background()))
}

func TestRunnerStopCancels(t *testing.T) {
	r := New("slow", []string{"x"}, func(ctx context.Context, _ string, _ *Tracker[int]) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}, nil)
	require.NoError(t, r.Stop(context.Background()), "stop before start")
	require.NoError(t, r.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, r.Stop(ctx))
	select {
	case <-r.Done():
	default:
		t.Fatal("not done after Stop")
	}
}

func TestRunnerWithoutFilesIsDone(t *testing.T) {
	r := New[int]("none", nil, nil, nil)
	require.NoError(t, r.Start(context.Background()))
	<-r.Done()
}

// While a file is replayed, Status reports how far it read and its latest statistics.
func TestRunnerReportsProgress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.WriteFile(file, []byte("0123456789"), 0o600))
	half, finish := make(chan struct{}), make(chan struct{})
	r := New("progress", []string{file}, func(_ context.Context, f string, tr *Tracker[int]) (int, error) {
		fh, err := os.Open(f)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		buf := make([]byte, 4)
		_, err = io.ReadFull(tr.Reader(fh), buf)
		require.NoError(t, err)
		tr.Report(4)
		close(half)
		<-finish
		return 10, nil
	}, nil)
	require.NoError(t, r.Start(context.Background()))
	<-half
	stats, err := r.Status()
	require.NoError(t, err)
	require.Len(t, stats, 1)
	assert.Equal(t, Progress[int]{File: file, BytesRead: 4, BytesTotal: 10, Stats: 4, Elapsed: stats[0].Elapsed}, stats[0])
	close(finish)
	<-r.Done()
	stats, _ = r.Status()
	require.Len(t, stats, 1)
	assert.True(t, stats[0].Done)
	assert.Equal(t, 10, stats[0].Stats)
	require.NoError(t, r.Stop(context.Background()))
}
