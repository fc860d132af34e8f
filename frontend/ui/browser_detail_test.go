package ui_test

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
)

// TestBrowserEventDetail: a Kubernetes Event's panel shows its reason, count, first and last
// seen and the reporting component as kubectl events does, and says that an Event changes no
// field; a write recorded at Metadata level says why its changes are unknown.
func TestBrowserEventDetail(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	id := rolloutDeploymentID(t, srv.URL)
	tr := getTrace(t, srv.URL, id)
	spanID, index := "", -1
	for _, sp := range tr.Spans {
		for i, l := range sp.Logs {
			if len(l.Fields) > 0 && l.Fields[0].Key == "event" && index < 0 {
				for _, f := range l.Fields {
					if f.Key == "reason" && f.Value == "ScalingReplicaSet" {
						spanID, index = sp.SpanID, i
					}
				}
			}
		}
	}
	require.NotEmpty(t, spanID, "a ScalingReplicaSet Event folded on the Deployment")

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id + "?span=" + spanID + "&event=" + strconv.Itoa(index))
	dl := p.waitText(`.event-detail dl`, "Reason")
	assert.Contains(t, dl, "ScalingReplicaSet")
	assert.Contains(t, dl, "Reported by")
	assert.Contains(t, dl, "deployment-controller")
	assert.Contains(t, p.text(`.event-detail .no-changes`), "A Kubernetes Event reports what a component saw or did")

	got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`import('/static/js/detail.js').then(d => d.noChanges({auditLevel: 'Metadata', snapshot: '', source: 'audit', k8s: null}))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Contains(t, got, "Metadata level: its request and response bodies were not recorded")
}

// A whole list of objects in a diff (a Pod's first status patch sets status.conditions) is shown
// one row per item and field, named by the merge key; lists without one stay whole.
func TestBrowserListDiff(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	p := newPage(t, browser)
	p.open(srv.URL + "/")
	rows, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`import('/static/js/diff.js').then(d => {
		const lines = ['status.conditions <none> -> [{"type":"Ready","status":"True"},{"type":"PodScheduled","status":"True"}]',
			'status.conditions [{"type":"Ready","status":"False","reason":"ContainersNotReady"}] -> [{"type":"Ready","status":"True"}]',
			'spec.args ["a"] -> ["a","b"]',
			'status.conditions[type=Available] <none> -> {"type":"Available","status":"False"}'];
		return lines.flatMap(l => { const s = d.splitDiff(l); return (d.expandList(s) || d.expandObject(s) || [s]).map(r => r.path + ' ' + r.old + ' -> ' + r.new); });
	})`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"status.conditions[type=Ready].status <none> -> True",
		"status.conditions[type=PodScheduled].status <none> -> True",
		"status.conditions[type=Ready].status False -> True",
		"status.conditions[type=Ready].reason ContainersNotReady -> <none>",
		`spec.args ["a"] -> ["a","b"]`,
		"status.conditions[type=Available].type <none> -> Available",
		"status.conditions[type=Available].status <none> -> False",
	}, rows)
}
