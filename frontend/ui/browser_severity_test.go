package ui_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
)

// TestBrowserSeverity opens the healthy rollout's Deployment (full tree): the deployment and
// replicaset controllers' 409 conflicts (retried at once) and kwok's deletes of pods already gone
// (404) are drawn in their own muted styles, not as errors, so the healthy rollout has no red
// marker; rows count their retried conflicts; the legend names every colour and outline. A
// failed request and a Warning Event still classify as errors.
func TestBrowserSeverity(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	id := rolloutDeploymentID(t, srv.URL)

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id + "?collapsed=")
	p.waitJS("the markers", `document.querySelectorAll('.rows .mk').length > 20`)
	var counts map[string]int
	// Every event's class: a single marker's, or each member's of a group of close markers.
	p.eval(`(() => { const c = {error: 0, conflict: 0, routine: 0, create: 0, delete: 0};
		for (const m of document.querySelectorAll('.rows .mk')) {
			const classes = m.dataset.group ? m.dataset.classes.split(' ') : [...m.classList];
			for (const k of classes) if (k in c) c[k]++;
		}
		return c; })()`, &counts)
	assert.Zero(t, counts["error"], "a healthy rollout has no red marker: %v", counts)
	assert.Positive(t, counts["conflict"], "the controllers' 409s: %v", counts)
	assert.Positive(t, counts["create"], "%v", counts)
	assert.Positive(t, counts["routine"], "kwok's deletes of pods already gone: %v", counts)
	var erroredRows int
	p.eval(`document.querySelectorAll('.rows .row.error').length`, &erroredRows)
	assert.Zero(t, erroredRows)
	var retried []string
	p.eval(`[...document.querySelectorAll('.rows .lbl .conflicts')].map(e => e.innerText)`, &retried)
	assert.NotEmpty(t, retried, "rows count their retried conflicts")
	for _, r := range retried {
		assert.Regexp(t, `^\d+ retried$`, r)
	}

	var legend []string
	p.eval(`[...document.querySelectorAll('.legend .item')].map(i => i.querySelector('.mk').className + ': ' + i.innerText)`, &legend)
	joined := strings.Join(legend, "\n")
	for _, want := range []string{"mk create: create", "mk error: failed request", "mk conflict: conflict, retried", "mk routine: delete of an object already gone",
		"mk event: Kubernetes Event", "mk critical: on the critical path"} {
		assert.Contains(t, joined, want)
	}

	// The rules, on events the rollout does not have.
	classes, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`import('/static/js/model.js').then(m => [
		m.markerClass([{key: 'update', value: 'update (Conflict)'}, {key: 'responseCode', value: 409}, {key: 'userAgent', value: 'kubectl/v1.37.2'}], 'update (Conflict)', 'update'),
		m.markerClass([{key: 'create', value: 'create (Forbidden)'}, {key: 'responseCode', value: 403}], 'create (Forbidden)', 'create'),
		m.markerClass([{key: 'kelemetry.event.type', value: 'Warning'}], 'BackOff', 'event'),
		m.markerClass([{key: 'patch', value: 'patch (Conflict)'}, {key: 'responseCode', value: 409}, {key: 'userAgent', value: 'kube-controller-manager/v1.37.2'}], 'patch (Conflict)', 'patch'),
		m.markerClass([{key: 'delete', value: 'delete (Not Found)'}, {key: 'responseCode', value: 404}], 'delete (Not Found)', 'delete'),
	])`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Equal(t, []string{"error", "error", "error", "conflict", "routine"}, classes,
		"a person's conflict, a refused create and a Warning Event stay errors")
}
