package objdiff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/diff"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestStreamWarm rebuilds a stream's state from writes another stream already turned into
// diffs: the first write observed afterwards is diffed against the last warmed version, and
// warming emits nothing and never moves an object back to an older version.
func TestStreamWarm(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	w := func(verb string, isObj bool, body []byte, rv string) Write {
		return Write{Object: pod, Verb: verb, Response: body, IsObject: isObj, ResourceVersion: rv, Time: at}
	}
	s, err := NewStream(diff.StreamConfig{}, telemetry.Settings{})
	require.NoError(t, err)
	s.Warm(ctx, w("create", true, podBody("1", "", "Pending"), "1"))
	s.Warm(ctx, w("patch", true, podBody("2", "node-1", "Pending"), "2"))
	s.Warm(ctx, w("patch", true, podBody("1", "", "Pending"), "1")) // older: ignored
	assert.Equal(t, 1, s.Len())

	r := s.Observe(ctx, w("patch", true, podBody("3", "node-1", "Running"), "3"))
	assert.Equal(t, []string{"diff: status.phase Pending -> Running"}, msgs(r), "diffed against the last warmed version")

	// A warmed delete without the object forgets it; a warmed graceful delete keeps it as
	// deleting, so that the final removal points at the deletion snapshot.
	s.Warm(ctx, w("delete", true, podBody("4", "node-1", "Running"), "4"))
	r = s.Observe(ctx, w("delete", true, podBody("5", "node-1", "Succeeded"), "5"))
	assert.Equal(t, []string{"diff: deletion snapshot taken at resourceVersion 4; changes since:", "diff: status.phase Running -> Succeeded"}, msgs(r))
	s.Warm(ctx, w("delete", false, []byte(`{"kind":"Status"}`), ""))
	assert.Equal(t, 0, s.Len())

	var nilStream *Stream
	nilStream.Warm(ctx, w("create", true, podBody("1", "", "Pending"), "1")) // no panic
}
