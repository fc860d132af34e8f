package health

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunSortsExcludesAndBounds(t *testing.T) {
	down := errors.New("down")
	checks := []Check{
		{Name: "queue", Func: func(context.Context) error { return down }},
		{Name: "sinks", Func: func(context.Context) error { return nil }},
		{Name: "slow", Func: func(ctx context.Context) error {
			dl, ok := ctx.Deadline()
			require.True(t, ok, "every check runs with a deadline")
			assert.WithinDuration(t, time.Now().Add(Timeout), dl, time.Second)
			return nil
		}},
	}
	require.NoError(t, Validate(checks))
	res := Run(context.Background(), checks)
	assert.Equal(t, []string{"queue", "sinks", "slow"}, []string{res[0].Name, res[1].Name, res[2].Name})
	require.ErrorIs(t, Failed(res), down)
	assert.EqualError(t, Failed(res), "queue: down")

	res = Run(context.Background(), checks, "queue")
	assert.Len(t, res, 2)
	assert.NoError(t, Failed(res))
}

func TestValidate(t *testing.T) {
	ok := func(context.Context) error { return nil }
	assert.ErrorContains(t, Validate([]Check{{Name: "Queue", Func: ok}}), "lower-case")
	assert.ErrorContains(t, Validate([]Check{{Name: "", Func: ok}}), "lower-case")
	assert.ErrorContains(t, Validate([]Check{{Name: "a", Func: ok}, {Name: "a", Func: ok}}), "twice")
	assert.ErrorContains(t, Validate([]Check{{Name: "a"}}), "no function")
}
