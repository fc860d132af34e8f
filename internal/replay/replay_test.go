package replay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunnerReplaysInOrderAndReports(t *testing.T) {
	var seen []string
	r := New("test replay", []string{"a", "bad", "c"}, func(_ context.Context, f string) (int, error) {
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
	assert.Equal(t, []int{1, 0, 1}, stats)
	assert.ErrorContains(t, err, "test replay bad: broken line")
	require.NoError(t, r.Stop(context.Background()))
}

func TestRunnerStopCancels(t *testing.T) {
	r := New("slow", []string{"x"}, func(ctx context.Context, _ string) (int, error) {
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
