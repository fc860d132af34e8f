package pebble

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/store/internal/storetest"
	"github.com/kelemetry/kelemetry/telemetry"
)

// TestChangeFeed: the change index holds exactly the recorded logs' write events (the bulk
// replay's too) and answers the feed's filters, pages and ranges (storetest.RunChanges).
func TestChangeFeed(t *testing.T) {
	storetest.RunChanges(t, "../..", func(t *testing.T) storetest.ChangeStore {
		p, err := Open(context.Background(), Config{Dir: t.TempDir()}, 0, telemetry.Settings{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Stop(context.Background()) })
		return p
	}, "rollout", "cronjob", "bulk")
}

// Retention deletes a window's change entries with it: the feed never lists a write whose trace
// is gone, and the index entries timed at or before the deleted window leave the disk.
func TestChangeFeedRetention(t *testing.T) {
	ctx := context.Background()
	p := openTestPebble(t, Config{MaxAge: time.Hour}, nil)
	obj := ref("c", "", "pods", "ns", "p")
	var windows []time.Time
	for i := range 4 {
		w := t0.Add(time.Duration(i) * win)
		windows = append(windows, w)
		spans := windowSpans(obj, w, 3, 16)
		for _, sp := range spans[1:] {
			sp.Attributes = append(sp.Attributes, aggregator.Attr{Key: aggregator.AttrVerb, Value: "update"})
		}
		require.NoError(t, p.Export(ctx, spans))
	}
	count := func() int {
		page, err := p.ChangeFeed().Find(ctx, changefeed.Query{Limit: changefeed.MaxLimit})
		require.NoError(t, err)
		return len(page.Changes)
	}
	entries := func() int {
		n := 0
		require.NoError(t, p.scan(ctx, []byte{prefixChange}, prefixEnd([]byte{prefixChange}), func(*pebble.Iterator) (bool, error) { n++; return true, nil }))
		return n
	}
	require.Equal(t, 12, count())
	p.now = func() time.Time { return windows[3].Add(time.Hour + time.Minute) } // the first three are over an hour old
	require.NoError(t, p.retain(ctx, p.now()))
	page, err := p.ChangeFeed().Find(ctx, changefeed.Query{Limit: changefeed.MaxLimit})
	require.NoError(t, err)
	require.Len(t, page.Changes, 3, "only the newest window's writes")
	for _, c := range page.Changes {
		assert.Equal(t, windows[3], c.Window)
	}
	assert.LessOrEqual(t, entries(), 3+2, "the deleted windows' entries are gone, but for those timed after the last deleted window's start")
}
