package ui_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
)

// TestBrowserCriticalPath opens the rollout's Deployment and checks that the critical path the
// API computes is highlighted on the chart, that the panel names the controllers with their
// waits, and that a step of the list opens its event.
func TestBrowserCriticalPath(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	srv := serve(t, st, frontend.Config{})

	id := rolloutDeploymentID(t, srv.URL)
	var cp query.CriticalPath
	getJSON(t, srv.URL+"/api/critical-path/"+id, &cp)
	require.NotEmpty(t, cp.Steps)

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id)
	p.waitJS("the critical path", `kelemetryUI.criticalSteps() > 0`)
	var steps int
	p.eval(`kelemetryUI.criticalSteps()`, &steps)
	assert.Equal(t, len(cp.Steps), steps)

	// Highlighted: the markers of the path's events on their objects' rows. The Deployment's
	// row holds its first step (admin's create) and the ReplicaSet and Pod rows theirs.
	var onPath []string
	p.eval(`[...document.querySelectorAll('.row.on-path .lbl')].map(e => e.innerText)`, &onPath)
	assert.NotEmpty(t, onPath)
	joined := ""
	for _, s := range onPath {
		joined += s + "\n"
	}
	assert.Regexp(t, `deployments\s+demo`, joined)
	assert.Regexp(t, `pods\s+demo-`, joined)
	var marked int
	p.eval(`document.querySelectorAll('.mk.critical').length`, &marked)
	assert.Positive(t, marked)
	var plain int
	p.eval(`document.querySelectorAll('.row:not(.on-path) .mk.critical').length`, &plain)
	assert.Zero(t, plain, "highlighted markers sit on rows marked on the path")

	// The panel: where the time went and the controllers' reaction times.
	summary := p.waitText(`details.critical summary`, "Critical path:")
	assert.Contains(t, summary, "steps")
	// The headline names the slowest controller reaction, not the operator's pauses between
	// kubectl commands, which are counted apart as waiting for a person: on kwok no controller
	// was slow.
	require.NotNil(t, cp.Slowest)
	assert.Regexp(t, `slowest reaction: replicaset-controller create pods \(waited 61\.7\s?ms\)`, summary)
	assert.Regexp(t, `waiting for a person: 20\.\d+\s?s`, summary)
	assert.NotContains(t, summary, "admin")
	p.click(`details.critical summary`)
	p.waitText(`details.critical .where`, "deployment-controller")
	assert.Contains(t, p.text(`details.critical .critical-steps`), "rule deployment-rollout")
	assert.Contains(t, p.text(`details.critical .reactions`), "kube-scheduler")
	assert.Contains(t, p.text(`details.critical .reactions`), "kwok-controller")
	list := p.text(`details.critical .critical-steps`)
	assert.Contains(t, list, "replicaset-controller")
	assert.Contains(t, list, "binding")
	// Each step shows its rule and a bar of its wait; admin's steps are a person's.
	var rules, bars, persons int
	p.eval(`document.querySelectorAll('.critical-steps li .rule').length`, &rules)
	p.eval(`document.querySelectorAll('.critical-steps li .wbar').length`, &bars)
	p.eval(`[...document.querySelectorAll('.critical-steps li.person')].filter(li => li.innerText.includes('waiting for a person') && li.innerText.includes('admin')).length`, &persons)
	assert.Equal(t, len(cp.Steps), rules)
	assert.Equal(t, len(cp.Steps), bars)
	assert.Equal(t, 5, persons, "admin's create, scale, image change, scale and delete")
	assert.Contains(t, list, "rule deployment-spec")
	assert.Contains(t, p.text(`details.critical .where`), "admin (a person)")
	p.screenshot("ui-critical.png", true)

	// A step of the list opens its event in the detail panel.
	p.eval(`(() => { const a = [...document.querySelectorAll('.critical-steps li')].find(li => li.innerText.includes('kube-scheduler')).querySelector('a'); a.click(); return true; })()`, new(bool))
	p.waitText(`.event-detail .event-title`, "kube-scheduler create binding")

	// In tree mode events are rows of their own: the path's are marked by span ID.
	p.open(srv.URL + "/trace/" + id[:2] + "0" + id[3:])
	p.waitJS("the critical path in tree mode", `kelemetryUI.criticalSteps() > 0 && document.querySelectorAll('.row.kind-event.on-path').length > 0`)
	var eventRows []string
	p.eval(`[...document.querySelectorAll('.row.kind-event.on-path .lbl')].map(e => e.innerText)`, &eventRows)
	assert.NotEmpty(t, eventRows)
	for _, r := range eventRows {
		assert.NotContains(t, r, " get", "reads are not on the path")
	}
}
