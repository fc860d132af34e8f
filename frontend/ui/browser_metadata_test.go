package ui_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
)

// foregroundFixture is a recorded foreground deletion of Deployment web (see the audit
// consumer's testdata): its last event is the garbage collector's metadata-only patch that
// removed the last finalizer.
var foregroundFixture = filepath.Join("..", "..", "audit", "consumer", "testdata", "foreground", "audit.jsonl")

// TestBrowserMetadataOnlyWrite: the garbage collector's patch through its metadata-only client
// shows as the deletion it is, with the finalizer it removed; seen without the version before it,
// the patch's request body is shown as the change, marked as such, instead of no change at all.
func TestBrowserMetadataOnlyWrite(t *testing.T) {
	browser := newBrowser(t)
	lines, err := os.ReadFile(foregroundFixture)
	require.NoError(t, err)
	all := strings.Split(strings.TrimSpace(string(lines)), "\n")
	onlyGC := filepath.Join(t.TempDir(), "gc.jsonl")
	require.NoError(t, os.WriteFile(onlyGC, []byte(all[len(all)-1]+"\n"), 0o600))

	open := func(t *testing.T, path string) *page {
		srv := serve(t, ingestFiles(t, path, ""), frontend.Config{})
		day := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
		var sums []query.SearchSummary
		q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"web"}`},
			"start": {strconv.FormatInt(day.UnixMicro(), 10)}, "end": {strconv.FormatInt(day.Add(24*time.Hour).UnixMicro(), 10)}}
		getJSON(t, srv.URL+"/api/ui/search?"+q.Encode(), &sums)
		require.Len(t, sums, 1)
		tr := getTrace(t, srv.URL, sums[0].TraceID)
		spanID, index := "", -1
		for _, sp := range tr.Spans {
			for i, l := range sp.Logs {
				if len(l.Fields) > 0 && strings.HasSuffix(l.Fields[0].Key, "audit") && strings.Contains(l.Fields[0].Value.(string), "generic-garbage-collector patch") {
					spanID, index = sp.SpanID, i
				}
			}
		}
		require.NotEmpty(t, spanID, "the garbage collector's patch folded on the Deployment")
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sums[0].TraceID + "?span=" + spanID + "&event=" + strconv.Itoa(index))
		p.waitText(`.event-detail .event-title`, "deleted: last finalizer removed")
		return p
	}

	t.Run("diffed against the last version", func(t *testing.T) {
		p := open(t, foregroundFixture)
		assert.Equal(t, []string{"metadata.finalizers", `["foregroundDeletion"]`, "→", "<none>"}, p.diffRow("metadata.finalizers"))
		assert.Empty(t, p.text(`.event-detail .diff-note`))
	})
	t.Run("first seen: the request's patch, marked", func(t *testing.T) {
		p := open(t, onlyGC)
		assert.Contains(t, p.text(`.event-detail .diff-note`), "the changes are the request's merge patch")
		assert.Equal(t, []string{"metadata.finalizers", "<unknown>", "→", "<none>"}, p.diffRow("metadata.finalizers"))
		var unknown bool
		p.eval(`!!document.querySelector('.event-detail table.diff td.old.unknown[title]')`, &unknown)
		assert.True(t, unknown, "the unknown value before is styled and explained")
		assert.Empty(t, p.text(`.event-detail .no-changes`), "not 'no field changes recorded'")
	})
}
