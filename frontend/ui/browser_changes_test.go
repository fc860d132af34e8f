package ui_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
)

// The rollout fixture's range as the Changes page takes it.
func changesRange() string {
	return "from=" + url.QueryEscape(rolloutFrom.Format(time.RFC3339)) + "&to=" + url.QueryEscape(rolloutTo.Format(time.RFC3339))
}

// TestBrowserChanges: the Changes page lists the rollout's writes newest first; a filter shows as
// a chip that removes it; a controller's burst is one row that opens into its writes; a write
// opens into its diff and links to its trace; dragging across the rate chart narrows the range.
func TestBrowserChanges(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestRollout(t), frontend.Config{})
	p := newPage(t, browser)

	// A person's writes: admin's five, one row each, the filter as a chip.
	p.open(srv.URL + "/changes?" + changesRange() + "&userKind=person")
	p.waitJS("the rows", `document.querySelectorAll('.change-list > details.change').length > 0`)
	var titles []string
	p.eval(`[...document.querySelectorAll('.change-list > details.change .change-title')].map(e => e.innerText)`, &titles)
	assert.Equal(t, []string{"admin deleted deployments.apps/demo", "admin patched deployments.apps/demo (scale)", "admin patched deployments.apps/demo",
		"admin patched deployments.apps/demo (scale)", "admin created deployments.apps/demo"}, titles, "newest first")
	assert.Contains(t, p.text(`.chips`), "Kind of user: person")

	// Open the image change: its diff and links.
	p.click(`.change-list > details.change:nth-child(3) > summary`)
	p.waitText(`.change-diff-lines`, "alpine:3.17")
	assert.Contains(t, p.text(`.change-diff-lines`), "spec.template.spec.containers[name=alpine].image alpine:3.16 -> alpine:3.17")
	assert.Contains(t, p.location(), "open=", "the opened row is in the URL")
	opened := p.location()
	var href string
	p.eval(`document.querySelector('.change-body .change-trace').getAttribute('href')`, &href)
	assert.True(t, strings.HasPrefix(href, "/redirect?"), href)
	// The deep link opens the same row.
	p2 := newPage(t, browser)
	p2.open(opened)
	p2.waitText(`.change-diff-lines`, "alpine:3.17")

	// The chip's × removes the filter.
	p.click(`.chip[data-key="userKind"] .chip-x`)
	p.waitJS("every write", `document.querySelectorAll('.change-list > details.change').length > 10`)
	assert.NotContains(t, p.location(), "userKind")

	// Bursts: the ReplicaSet controller's Pod creations are one row, which opens into them.
	p.open(srv.URL + "/changes?" + changesRange() + "&resource=pods&verb=create")
	p.waitJS("the rows", `document.querySelectorAll('.change-list > details.change').length > 0`)
	var bursts []string
	p.eval(`[...document.querySelectorAll('.change-list > details.change.burst .change-title')].map(e => e.innerText)`, &bursts)
	require.Len(t, bursts, 2, "the ReplicaSet controller's creations and the scheduler's bindings, interleaved")
	assert.Equal(t, []string{"kube-scheduler created 8 pods (binding)", "replicaset-controller created 8 pods"}, bursts,
		"newest first: the last binding came after the last creation")
	p.eval(`(() => { document.querySelectorAll('.change-list > details.change.burst')[1].querySelector('summary').click(); return true; })()`, new(bool))
	p.waitJS("the burst's writes", `document.querySelectorAll('details.change.burst .burst-members > details.change').length > 1`)
	var members []string
	p.eval(`[...document.querySelectorAll('.change-list > details.change.burst')[1].querySelectorAll('.burst-members > details.change .change-title')].map(e => e.innerText)`, &members)
	assert.Len(t, members, 8)
	for _, m := range members {
		assert.Regexp(t, `^replicaset-controller created pods/demo-`, m)
	}

	// Drag across the middle of the rate chart: the range narrows to the selection.
	p.open(srv.URL + "/changes?" + changesRange())
	p.waitJS("the chart", `document.querySelectorAll('.rate-bar').length === 60`)
	var box struct{ X, Y, W float64 }
	p.eval(`(() => { const r = document.querySelector('.rate-chart').getBoundingClientRect(); return {X: r.left, Y: r.top + r.height / 2, W: r.width}; })()`, &box)
	p.do(chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, box.X+box.W*0.25, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, box.X+box.W*0.5, box.Y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, box.X+box.W*0.75, box.Y, chromedp.ButtonLeft))
	p.waitJS("narrowed", `new URLSearchParams(location.search).get('from') !== `+jsStr(rolloutFrom.Format(time.RFC3339)))
	q, err := url.ParseQuery(strings.SplitN(p.location(), "?", 2)[1])
	require.NoError(t, err)
	from, err := time.Parse(time.RFC3339, q.Get("from"))
	require.NoError(t, err)
	to, err := time.Parse(time.RFC3339, q.Get("to"))
	require.NoError(t, err)
	span := rolloutTo.Sub(rolloutFrom)
	assert.InDelta(t, span.Seconds()/4, from.Sub(rolloutFrom).Seconds(), span.Seconds()/50)
	assert.InDelta(t, span.Seconds()*3/4, to.Sub(rolloutFrom).Seconds(), span.Seconds()/50)
	p.waitText(`.chips`, "From:")

	// Routine outcomes are not failures: the controllers' conflicts are retried, kwok's deletes of
	// Pods already gone are counted as such; the rollout has no red row.
	p.open(srv.URL + "/changes?" + changesRange())
	p.waitJS("the rows", `document.querySelectorAll('.change-list > details.change').length > 10`)
	all := p.text(`.change-list`)
	assert.Regexp(t, `deployment-controller updated deployments\.apps/demo \(status\) \d+ times, \d+ retried`, all)
	assert.Regexp(t, `kwok-controller deleted \d+ pods, \d+ already gone`, all)
	var red []string
	p.eval(`[...document.querySelectorAll('.change-list > details.change.failed .change-title')].map(e => e.innerText)`, &red)
	for _, r := range red {
		assert.Contains(t, r, "clustertrustbundles", "the one real failure: kube-apiserver's 422")
	}
	p.screenshot("ui-changes.png", true)
}

// TestBrowserChangesLive: with the live switch on, a write stored after the page opened appears
// at the top within seconds, if the filters select it.
func TestBrowserChangesLive(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	srv := serve(t, st, frontend.Config{})
	p := newPage(t, browser)
	p.open(srv.URL + "/changes?since=5m&userKind=person")
	p.click(`.live-switch`)
	p.waitJS("the live tail", `location.search.includes('live=1') && !!document.querySelector('.live-status')`)
	time.Sleep(300 * time.Millisecond) // the tail's request is open
	now := time.Now().UTC()
	obj := aggregator.ObjectRef{Cluster: "test", Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop", Name: "web"}
	write := func(id byte, user, agent string) *aggregator.Span {
		return &aggregator.Span{TraceID: trace.TraceID{7, id}, SpanID: trace.SpanID{7, id}, Kind: aggregator.KindEvent, Source: "audit",
			Name: user + " patch", Object: obj, Window: now.Truncate(time.Hour), Start: now, End: now.Add(time.Millisecond),
			Attributes: aggregator.Attrs{{Key: aggregator.AttrVerb, Value: "patch"}, {Key: aggregator.AttrUser, Value: user},
				{Key: aggregator.AttrUserAgent, Value: agent}, {Key: aggregator.AttrStatusCode, Value: "200"}}}
	}
	require.NoError(t, st.Export(t.Context(), []*aggregator.Span{
		write(1, "system:serviceaccount:kube-system:deployment-controller", "kube-controller-manager/v1.37.2"),
		write(2, "alice", "kubectl/v1.37.2 (linux/amd64)"),
	}))
	p.waitText(`.change-list`, "alice patched deployments.apps/web")
	assert.NotContains(t, p.text(`.change-list`), "deployment-controller", "the filter holds for the live tail")
	assert.Contains(t, p.text(`.live-status`), "1 new change")
}
