package ui_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
)

// TestBrowserTimeline opens the rollout's Deployment: rows are ordered by start time (the first
// ReplicaSet above the one the image change made), the axis ticks fall on round values, and
// Escape closes the side panel.
func TestBrowserTimeline(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	id := rolloutDeploymentID(t, srv.URL)
	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id + "?collapsed=")
	p.waitJS("rows", `document.querySelectorAll('.rows .row').length > 5`)

	var rsRows []string
	p.eval(`[...document.querySelectorAll('.rows .row .lbl')].map(l => l.innerText).filter(t => t.includes('replicasets'))`, &rsRows)
	require.Len(t, rsRows, 2)
	assert.Contains(t, rsRows[0], "demo-7fb4c846ff", "the first ReplicaSet (created first) above")
	assert.Contains(t, rsRows[1], "demo-78bb56d9c4", "the image change's ReplicaSet below")

	var ticks []string
	p.eval(`[...document.querySelectorAll('.axis .tick')].map(t => t.innerText)`, &ticks)
	assert.Equal(t, []string{"0", "+5s", "+10s", "+15s", "+20s"}, ticks, "round ticks over the 22 s rollout")
	for _, tk := range ticks {
		assert.Regexp(t, regexp.MustCompile(`^(0|\+\d+(\.0+)?s)$`), tk)
	}

	// At 1280 px wide the title is whole: inside the window, not clipped.
	p.do(chromedp.EmulateViewport(1280, 800))
	var fits bool
	p.eval(`(() => { const h = document.querySelector('.trace-title'); const r = h.getBoundingClientRect();
		return h.innerText.length > 0 && r.right <= window.innerWidth && h.scrollWidth <= h.clientWidth + 1; })()`, &fits)
	assert.True(t, fits, "the title fits at 1280 px")

	// Times in UTC by default; the header's switch shows the browser's zone (Berlin: UTC+1) and
	// the choice is kept.
	_, err := chromedp.Call(p.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
	require.NoError(t, err)
	axis := p.text(`.axis .lbl`)
	assert.Contains(t, axis, "17:09:30")
	assert.Contains(t, axis, "UTC")
	p.click(`header.top button.tz`)
	p.waitJS("local times", `document.querySelector('.axis .lbl') && document.querySelector('.axis .lbl').innerText.includes('18:09:30')`)
	assert.NotContains(t, p.text(`.axis .lbl`), "UTC")
	assert.NotContains(t, p.text(`header.top button.tz`), "UTC")
	p.open(p.location())
	p.waitJS("the choice kept", `document.querySelector('.axis .lbl') && document.querySelector('.axis .lbl').innerText.includes('18:09:30')`)
	p.click(`header.top button.tz`)
	p.waitJS("UTC again", `!!document.querySelector('.axis .lbl') && document.querySelector('.axis .lbl').innerText.includes('17:09:30')`)
	assert.Contains(t, p.text(`.axis .lbl`), "UTC")

	// Copy link puts the page's URL on the clipboard; Download JSON saves the trace as Jaeger's
	// API answers it.
	p.eval(`(() => { window.copied = null; navigator.clipboard.writeText = t => { window.copied = t; return Promise.resolve(); };
		window.saved = null; window.blobs = {}; const create = URL.createObjectURL;
		URL.createObjectURL = b => { const u = create(b); window.blobs[u] = b; return u; };
		const click = HTMLAnchorElement.prototype.click;
		HTMLAnchorElement.prototype.click = function () { if (this.download) { window.saved = { name: this.download, href: this.href }; return; } click.call(this); };
		return true; })()`, new(bool))
	p.click(`button.copy-link`)
	p.waitJS("the copied link", `window.copied !== null`)
	var copied string
	p.eval(`window.copied`, &copied)
	assert.Equal(t, p.location(), copied)
	assert.Equal(t, "Copied", p.text(`button.copy-link`))
	p.click(`button.download-json`)
	p.waitJS("the download", `window.saved !== null`)
	saved, err := chromedp.Run(p.ctx, chromedp.Evaluate[struct {
		Name string `json:"name"`
		Body string `json:"body"`
	}](`window.blobs[window.saved.href].text().then(body => ({ name: window.saved.name, body }))`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	assert.Equal(t, "trace-"+id+".json", saved.Name)
	var file struct {
		Data []query.JaegerTrace `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(saved.Body), &file))
	require.Len(t, file.Data, 1)
	assert.Equal(t, getTrace(t, srv.URL, id).Spans[0].SpanID, file.Data[0].Spans[0].SpanID)
	assert.Len(t, file.Data[0].Spans, len(getTrace(t, srv.URL, id).Spans))

	p.clickRow("deployments", ".op")
	p.waitJS("the panel", `!document.querySelector('aside.detail').hidden`)
	p.do(chromedp.KeyEvent(kb.Escape))
	p.waitJS("the panel closed by Escape", `document.querySelector('aside.detail').hidden`)
	assert.NotContains(t, p.location(), "span=", "closing the panel leaves the selection out of the URL")
}

// TestBrowserZoomAndGroups: markers closer than a few pixels are one group that lists its events
// (each opens its event); dragging across the axis zooms in (the URL keeps the range, the axis
// and the overview follow, groups split), Reset zoom shows the whole trace again, and a link
// with the range opens zoomed.
func TestBrowserZoomAndGroups(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	id := rolloutDeploymentID(t, srv.URL)
	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + id)
	p.waitJS("rows", `document.querySelectorAll('.rows .row').length > 0`)

	groupsOnDeployment := func() (groups, singles int) {
		t.Helper()
		var c struct{ Groups, Singles int }
		p.eval(`(() => { const r = [...document.querySelectorAll('.rows .row')].find(r => r.querySelector('.lbl').innerText.includes('deployments'));
			return { Groups: r.querySelectorAll('.mk.group').length, Singles: r.querySelectorAll('.mk:not(.group)').length }; })()`, &c)
		return c.Groups, c.Singles
	}
	g0, s0 := groupsOnDeployment()
	require.Positive(t, g0, "the Deployment's events within milliseconds of each other are grouped")
	var member string // an event of the Deployment's first group
	p.eval(`[...document.querySelectorAll('.rows .row')].find(r => r.querySelector('.lbl').innerText.includes('deployments')).querySelector('.mk.group').dataset.group.split(' ')[1]`, &member)

	// A group lists its events; one opens.
	p.clickRow("deployments", ".mk.group")
	p.waitJS("the group's list", `document.querySelectorAll('.mk-popover .mk-item').length > 1`)
	var items []string
	p.eval(`[...document.querySelectorAll('.mk-popover .mk-item')].map(i => i.innerText)`, &items)
	for _, it := range items {
		assert.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}`, it)
	}
	p.click(`.mk-popover .mk-item`)
	p.waitJS("the event", `!!document.querySelector('.event-detail .event-title')`)
	assert.Contains(t, p.location(), "event=")
	var popovers int
	p.eval(`document.querySelectorAll('.mk-popover').length`, &popovers)
	assert.Zero(t, popovers, "the list closes on a choice")

	// Drag across the first 5% of the axis: the rollout's first second.
	var box struct{ X, Y, W float64 }
	p.eval(`(() => { const r = document.querySelector('.axis .tl').getBoundingClientRect(); return {X: r.left, Y: r.top + r.height / 2, W: r.width}; })()`, &box)
	p.do(chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, box.X+2, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box.X+box.W*0.025, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, box.X+box.W*0.05, box.Y, chromedp.ButtonLeft))
	p.waitJS("zoomed", `location.search.includes('zoom=')`)
	zoomed := p.location()
	assert.Regexp(t, `zoom=\d+-\d+`, zoomed)
	var resetShown bool
	p.eval(`!document.querySelector('.zoom-reset').hidden`, &resetShown)
	assert.True(t, resetShown)
	var window float64
	p.eval(`parseFloat(document.querySelector('.minimap .mm-window').style.width)`, &window)
	assert.Less(t, window, 10.0, "the overview's window shows the zoomed range")
	var ticks []string
	p.eval(`[...document.querySelectorAll('.axis .tick')].map(t => t.innerText)`, &ticks)
	assert.NotContains(t, ticks, "+5s", "ticks of the zoomed range")
	g1, s1 := groupsOnDeployment()
	assert.Less(t, g1, g0, "zoomed in, fewer groups (markers outside the range are not drawn, close ones split)")
	assert.Positive(t, s1, "single markers in the zoomed range (%d before)", s0)
	var split bool
	p.eval(`!![...document.querySelectorAll('.rows .row')].find(r => r.querySelector('.lbl').innerText.includes('deployments')).querySelector('.mk[data-log="`+member+`"]')`, &split)
	assert.True(t, split, "event %s of the first group has a marker of its own once zoomed in", member)

	p.click(`.zoom-reset`)
	p.waitJS("whole trace", `!location.search.includes('zoom=')`)

	p.open(zoomed)
	p.waitJS("zoomed by the link", `!!document.querySelector('.zoom-reset') && !document.querySelector('.zoom-reset').hidden`)
}
