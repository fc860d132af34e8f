package ui_test

import (
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
)

// traceOf returns the trace ID of the one search result for an object in [from, to).
func traceOf(t *testing.T, srvURL, resource, name string, from, to time.Time) string {
	t.Helper()
	var sums []query.SearchSummary
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"` + resource + `","name":"` + name + `"}`},
		"start": {strconv.FormatInt(from.UnixMicro(), 10)}, "end": {strconv.FormatInt(to.UnixMicro(), 10)}}
	getJSON(t, srvURL+"/api/ui/search?"+q.Encode(), &sums)
	require.Len(t, sums, 1, "%s %s", resource, name)
	return sums[0].TraceID
}

// markerClasses counts the events of the shown rows by class (a group of close markers counts
// each member).
func (p *page) markerClasses() map[string]int {
	p.t.Helper()
	var counts map[string]int
	p.eval(`(() => { const c = {error: 0, conflict: 0, routine: 0, create: 0, delete: 0, event: 0};
		for (const m of document.querySelectorAll('.rows .mk')) {
			const classes = m.dataset.group ? m.dataset.classes.split(' ') : [...m.classList];
			for (const k of classes) if (k in c) c[k]++;
		}
		return c; })()`, &counts)
	return counts
}

// The bulk rollout (Deployment bulk-01: 50 Pods, scaled, its image changed, deleted) is healthy:
// none of its rows or markers is red, though its controllers retried conflicts; the picture of
// the guide.
func TestBrowserBulkTrace(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestBulk(t), frontend.Config{})
	id := traceOf(t, srv.URL, "deployments", "bulk-01", time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC))
	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id + "?collapsed=")
	p.waitJS("the rows of the Deployment, its ReplicaSets and Pods", `document.querySelectorAll('.rows .row').length > 20`)
	var n int
	p.eval(`document.querySelectorAll('.rows .row').length`, &n)
	t.Logf("%d rows", n)
	counts := p.markerClasses()
	assert.Zero(t, counts["error"], "a healthy rollout has no red marker: %v", counts)
	assert.Positive(t, counts["conflict"], "%v", counts)
	var erroredRows int
	p.eval(`document.querySelectorAll('.rows .row.error').length`, &erroredRows)
	assert.Zero(t, erroredRows)
	// The headline: the ReplicaSet controller, busy with 1,000 Pods, is the slowest reaction, not
	// the deployment-controller waiting for the new Pods to become available.
	head := p.waitText(`details.critical summary`, "slowest reaction")
	assert.Contains(t, head, "slowest reaction: replicaset-controller")
	p.screenshot("ui-bulk.png", true)
}

// The CronJob's trace holds its Job and the Job's Pod, with the Events on each; the picture of
// the guide.
func TestBrowserCronJobTrace(t *testing.T) {
	browser := newBrowser(t)
	dir := filepath.Join("..", "..", "testdata", "cronjob")
	srv := serve(t, ingestFiles(t, filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "events-core-v1.json")), frontend.Config{})
	id := traceOf(t, srv.URL, "cronjobs", "nightly", time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC))
	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id)
	p.waitJS("the rows", `document.querySelectorAll('.rows .row').length >= 3`)
	rows := p.text(`.rows .row .lbl`)
	for _, want := range []string{"nightly", "nightly-manual", "nightly-manual-"} {
		assert.Contains(t, rows, want)
	}
	assert.Positive(t, p.markerClasses()["event"], "the recorded Events")
	p.screenshot("ui-cronjob.png", true)
}
