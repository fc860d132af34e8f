package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// findBrowser looks for Chromium or Chrome. Without one the browser tests skip, unless
// KELEMETRY_REQUIRE_BROWSER=1 (CI) makes that a failure.
func findBrowser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("KELEMETRY_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium, chromium-browser or google-chrome in PATH and KELEMETRY_REQUIRE_BROWSER=1")
	}
	t.Skip("no browser found (chromium, chromium-browser, google-chrome); set KELEMETRY_REQUIRE_BROWSER=1 to fail instead")
	return ""
}

const (
	viewW, viewH = 1400, 900
	testTimeout  = 60 * time.Second
)

// page is one browser tab and the uncaught script errors seen in it.
type page struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

// newBrowser starts one headless browser for the test and its subtests.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := findBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(viewW, viewH))
	ctx, cancel := context.WithTimeout(context.Background(), 4*testTimeout)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	require.NoError(t, chromedp.Do(bctx), "start %s", path)
	return bctx
}

// newPage opens a tab with its own timeout and records uncaught exceptions, which fail the test.
func newPage(t *testing.T, browser context.Context) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	ctx, tcancel := context.WithTimeout(ctx, testTimeout)
	t.Cleanup(tcancel)
	p := &page{t: t, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(viewW, viewH)))
	events := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil && ex.Description != "" {
				msg += " " + ex.Description
			}
			p.mu.Lock()
			p.errs = append(p.errs, msg)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		assert.Empty(t, p.errs, "uncaught exceptions in the page")
	})
	return p
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, steps...))
}

func (p *page) open(u string) { p.t.Helper(); p.do(chromedp.Navigate(u)) }

// waitJS waits until the JavaScript expression is truthy.
func (p *page) waitJS(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for {
		_, err = chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(50*time.Millisecond)))
		// A full page load (a link to /redirect) replaces the context the poll runs in; the poll
		// may also land in the middle of the navigation itself.
		if err == nil || time.Now().After(deadline) || !navigationRace(err) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the poll interval, before polling again in the new page context
	}
	if err != nil {
		shown, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		p.t.Fatalf("waiting for %s (%s): %v\npage at %s shows:\n%s", what, expr, err, p.location(), shown)
	}
}

// navigationRace reports an error of a poll that a page load interrupted: polling again in the
// new page is the answer.
func navigationRace(err error) bool {
	for _, m := range []string{"context with specified id", "context was destroyed", "Inspected target navigated or closed"} {
		if strings.Contains(err.Error(), m) {
			return true
		}
	}
	return false
}

// waitText waits until an element matching sel holds text and returns its text.
func (p *page) waitText(sel, text string) string {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("%s to contain %q", sel, text),
		fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.innerText.includes(%s))`, jsStr(sel), jsStr(text)))
	return p.text(sel)
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`[...document.querySelectorAll(%s)].map(e => e.innerText).join("\n")`, jsStr(sel))))
	require.NoError(p.t, err)
	return s
}

func (p *page) eval(expr string, v any) {
	p.t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](expr))
	require.NoError(p.t, err, expr)
	require.NoError(p.t, json.Unmarshal(raw, v), expr)
}

func (p *page) click(sel string) { p.t.Helper(); p.do(chromedp.Click(chromedp.CSS(sel))) }

// clickRow clicks the part of the first row whose label contains label, scrolling the rows
// (they are rendered only where visible) down a screen at a time until one is rendered.
func (p *page) clickRow(label, part string) {
	p.t.Helper()
	for range 50 {
		var ok bool
		p.eval(fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('.row')].find(r => r.querySelector('.lbl').innerText.includes(%s));
			if (!r) return false; r.querySelector(%s).click(); return true; })()`, jsStr(label), jsStr(part)), &ok)
		if ok {
			return
		}
		var end bool
		p.eval(`(() => { const r = document.querySelector('.rows'); if (r.scrollTop + r.clientHeight >= r.scrollHeight) return true;
			r.scrollTop += r.clientHeight; return false; })()`, &end)
		if end {
			break
		}
		time.Sleep(50 * time.Millisecond) // the next animation frame renders the rows scrolled to
	}
	require.Fail(p.t, "no row labelled "+label)
}

// clickEvent opens the folded event idx of the first row labelled label: its marker, or, when
// it is drawn in a group of close markers, the group and then the event in the group's list.
func (p *page) clickEvent(label string, idx int) {
	p.t.Helper()
	p.clickRow(label, fmt.Sprintf(`.mk[data-log="%d"], .mk.group[data-group~="%d"]`, idx, idx))
	var grouped bool
	p.eval(`!!document.querySelector('.mk-popover')`, &grouped)
	if grouped {
		p.click(fmt.Sprintf(`.mk-popover .mk-item[data-log="%d"]`, idx))
	}
}

func (p *page) location() string {
	p.t.Helper()
	u, err := chromedp.Run(p.ctx, chromedp.Location())
	require.NoError(p.t, err)
	return u
}

// screenshot saves a PNG of the viewport to $KELEMETRY_ARTIFACTS (or a temporary directory);
// with doc set and KELEMETRY_UPDATE_SCREENSHOTS=1 it also rewrites docs/guides/images/<name>,
// the guides' pictures.
func (p *page) screenshot(name string, doc bool) []byte {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	require.NoError(p.t, err)
	dir := os.Getenv("KELEMETRY_ARTIFACTS")
	if dir == "" {
		dir = p.t.TempDir()
	}
	require.NoError(p.t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name)
	require.NoError(p.t, os.WriteFile(path, png, 0o644))
	p.t.Logf("screenshot: %s", path)
	if doc && os.Getenv("KELEMETRY_UPDATE_SCREENSHOTS") == "1" {
		doc := filepath.Join("..", "..", "docs", "guides", "images", name)
		require.NoError(p.t, os.MkdirAll(filepath.Dir(doc), 0o755))
		require.NoError(p.t, os.WriteFile(doc, png, 0o644))
		p.t.Logf("updated %s", doc)
	}
	return png
}

func jsStr(s string) string { b, _ := json.Marshal(s); return string(b) }

// rolloutRange is the search URL part that selects the rollout fixture's time range.
func rolloutRange() string {
	return "range=custom&start=" + rolloutFrom.Format(time.RFC3339) + "&end=" + rolloutTo.Format(time.RFC3339)
}

// foldedEvent finds, in the Deployment's row of a tracing trace, the first folded event whose
// title and diff contain the given strings; it returns its index among the row's events and
// the diff line of path.
func foldedEvent(t *testing.T, tr query.JaegerTrace, spanOp, title, path string) (int, string) {
	t.Helper()
	for _, s := range tr.Spans {
		if !strings.HasPrefix(s.OperationName, spanOp) {
			continue
		}
		for i, l := range s.Logs {
			if len(l.Fields) == 0 || !strings.Contains(fmt.Sprint(l.Fields[0].Value), title) {
				continue
			}
			for _, f := range l.Fields {
				if f.Key != "diff" {
					continue
				}
				for _, line := range strings.Split(fmt.Sprint(f.Value), "\n") {
					if strings.HasPrefix(line, path+" ") {
						return i, line
					}
				}
			}
		}
	}
	t.Fatalf("no event %q with a %s change on %q", title, path, spanOp)
	return 0, ""
}

func rootOf(t *testing.T, tr query.JaegerTrace) query.JaegerSpan {
	t.Helper()
	for _, s := range tr.Spans {
		if len(s.References) == 0 {
			return s
		}
	}
	t.Fatal("no root span")
	return query.JaegerSpan{}
}

func getTrace(t *testing.T, srvURL, id string) query.JaegerTrace {
	t.Helper()
	var trs []query.JaegerTrace
	getJSON(t, srvURL+"/api/traces/"+id, &trs)
	require.Len(t, trs, 1)
	return trs[0]
}

// diffRow returns the cells of the shown diff row of path.
func (p *page) diffRow(path string) []string {
	p.t.Helper()
	var cells []string
	p.eval(fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('.event-detail table.diff tr')].find(r => r.cells[0].innerText === %s);
		return r ? [...r.cells].map(c => c.innerText) : []; })()`, jsStr(path)), &cells)
	return cells
}

func TestBrowser(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	srv := serve(t, st, frontend.Config{})

	// Several results: each has a check box to open the checked ones as one merged view.
	t.Run("SearchSeveralToMerge", func(t *testing.T) {
		p := newPage(t, browser)
		p.open(srv.URL + "/search?" + rolloutRange() + "&resource=pods&link=none")
		p.waitJS("several results", `document.querySelectorAll('.result-item input.pick').length >= 3`)
		results := p.text(`.results`)
		assert.Regexp(t, `\d+ results`, results)
		assert.Contains(t, results, "pods default/demo-")
		assert.True(t, p.evalBool(`document.querySelector('button.merge-open').disabled`), "nothing checked yet")
		p.eval(`(() => { const b = [...document.querySelectorAll('.result-item input.pick')]; b[0].click(); b[1].click(); return true; })()`, new(bool))
		p.waitText(`.merge-bar`, "2 results selected")
		assert.False(t, p.evalBool(`document.querySelector('button.merge-open').disabled`), "two checked: they can be merged")
		p.screenshot("ui-search.png", true)
	})

	t.Run("RolloutSearchTraceAndDiff", func(t *testing.T) {
		p := newPage(t, browser)
		p.open(srv.URL + "/")
		// The start page moves on to a search of the stored range once its suggestions load,
		// drawing a new form: fill in that one.
		p.waitJS("the start page's search", `location.pathname === '/search' && document.querySelector('form.filters') !== null`)
		p.do(
			chromedp.SetValue(chromedp.CSS(`input[name=resource]`), "deployments.apps"),
			chromedp.SetValue(chromedp.CSS(`input[name=name]`), "demo"),
			chromedp.SetValue(chromedp.CSS(`select[name=range]`), "custom"),
			chromedp.SetValue(chromedp.CSS(`input[name=start]`), rolloutFrom.Format(time.RFC3339)),
			chromedp.SetValue(chromedp.CSS(`input[name=end]`), "2026-11-29 18:00"),
		)
		p.click(`form.filters button[type=submit]`)
		results := p.waitText(`.results`, "deployments.apps default/demo")
		assert.Contains(t, results, "1 result")
		assert.Regexp(t, `\d+ objects`, results)
		assert.Regexp(t, `\d+ events`, results)
		assert.Contains(t, results, "cluster: test")
		assert.Contains(t, p.location(), "/search?", "the search is in the URL")
		assert.Contains(t, p.location(), "name=demo")
		p.screenshot("ui-search-one.png", false)

		p.click(`a.result`)
		p.waitJS("the trace rows", `document.querySelectorAll('.row').length > 3`)
		rows := p.text(`.row .lbl`)
		assert.Regexp(t, `test deployments\s+demo /`, rows, "the Deployment at the root")
		assert.Regexp(t, `replicasets\s+demo-[0-9a-f]+\n`, rows)
		assert.Regexp(t, `pods\s+demo-[0-9a-f]+-[0-9a-z]+`, rows)
		assert.Contains(t, p.text(`.tracebar`), "objects")
		id := strings.TrimPrefix(mustURL(t, p.location()).Path, "/trace/")
		require.Len(t, id, 32)
		assert.Equal(t, "21", id[2:4], "tracing, full tree")

		// Collapse and expand a ReplicaSet: its Pods leave and come back.
		var before, collapsed, expanded int
		p.eval(`kelemetryUI.rowCount()`, &before)
		p.clickRow("replicasets", ".toggle")
		p.eval(`kelemetryUI.rowCount()`, &collapsed)
		assert.Less(t, collapsed, before)
		assert.Contains(t, p.location(), "collapsed=", "the collapsed rows are in the URL")
		p.clickRow("replicasets", ".toggle")
		p.eval(`kelemetryUI.rowCount()`, &expanded)
		assert.Equal(t, before, expanded)

		// Open the Deployment, then the controller's status update that moves observedGeneration.
		tr := getTrace(t, srv.URL, id)
		idx, line := foldedEvent(t, tr, "demo", "deployment-controller update status", "status.observedGeneration")
		p.clickRow("deployments", ".op")
		p.waitText(`.detail .node-title`, "demo")
		p.click(fmt.Sprintf(`.detail tr.event-row:nth-child(%d)`, idx+1))
		p.waitText(`.event-detail .event-title`, "deployment-controller update status")
		detail := p.text(`.event-detail`)
		assert.Contains(t, detail, "system:serviceaccount:kube-system:deployment-controller", "user")
		assert.Contains(t, detail, "Response code")
		assert.Contains(t, detail, "User agent")
		old, nw := splitLine(t, line, "status.observedGeneration")
		assert.Equal(t, []string{"status.observedGeneration", old, "→", nw}, p.diffRow("status.observedGeneration"))
		// The same event with the mouse at its marker on the chart (in the group of events of
		// the rollout's first milliseconds: the group's list opens it).
		p.click(`.detail button.close`)
		p.clickEvent("deployments", idx)
		p.waitText(`.event-detail .event-title`, "deployment-controller update status")
		assert.Equal(t, []string{"status.observedGeneration", old, "→", nw}, p.diffRow("status.observedGeneration"))
		assert.NotEqual(t, old, nw)
		assert.Contains(t, p.location(), "event=", "the open event is in the URL")

		// The URL is shareable: a fresh tab on it shows the same event.
		shared := p.location()
		q := newPage(t, browser)
		q.open(shared)
		q.waitText(`.event-detail .event-title`, "deployment-controller update status")
		assert.Equal(t, []string{"status.observedGeneration", old, "→", nw}, q.diffRow("status.observedGeneration"))
		p.screenshot("ui-trace.png", true)

		// Switch the display mode in place: tree mode draws events as rows.
		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('select.mode-display'); s.value = 'tree'; s.dispatchEvent(new Event('change')); })()`))
		p.waitJS("tree mode rows", `document.querySelectorAll('.row.kind-event').length > 0`)
		p.screenshot("ui-trace-tree.png", false)
		// In tree mode an event is its own row; its details come from the span's tags and logs.
		p.clickRow("admin patch scale", ".op")
		p.waitText(`.event-detail .event-title`, "admin patch scale")
		assert.Contains(t, p.text(`.event-detail dl`), "admin")
		assert.Len(t, p.diffRow("spec.replicas"), 4, "the replicas change of the scale")
		assert.Contains(t, p.location(), "span=", "the selected event row is in the URL")
		assert.Contains(t, p.location(), "/trace/ff01", "the display digit follows the mode")
		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('select.mode-link'); s.value = 'none'; s.dispatchEvent(new Event('change')); })()`))
		p.waitJS("no pods without links", `location.pathname.startsWith('/trace/ff00') && document.querySelector('.rows') !== null && !document.querySelector('.rows').innerText.includes('pods')`)
	})

	t.Run("UserSpecChange", func(t *testing.T) {
		sum := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
		tr := getTrace(t, srv.URL, sum.TraceID)
		idx, line := foldedEvent(t, tr, "demo", "admin patch scale", "spec.replicas")
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 0`)
		// Click the event's marker on the Deployment's row.
		p.clickEvent("deployments", idx)
		p.waitText(`.event-detail .event-title`, "admin patch scale")
		assert.Contains(t, p.text(`.event-detail dl`), "admin")
		old, nw := splitLine(t, line, "spec.replicas")
		assert.Equal(t, []string{"spec.replicas", old, "→", nw}, p.diffRow("spec.replicas"))
	})

	t.Run("FirstVisit", func(t *testing.T) {
		// A fresh install replaying a recording: the start page lists what is stored.
		p := newPage(t, browser)
		p.open(srv.URL + "/")
		results := p.waitText(`.results`, "deployments.apps default/demo")
		assert.Contains(t, results, "result")
		loc := mustURL(t, p.location())
		assert.Equal(t, "/search", loc.Path)
		if time.Since(rolloutTo) > 48*time.Hour {
			assert.Equal(t, "custom", loc.Query().Get("range"), "the stored data's range, not the last 2 days")
		} else {
			assert.Equal(t, "2d", loc.Query().Get("range"), "recent data: the default range")
		}
		var suggested []string
		p.eval(`[...document.querySelectorAll('#dl-resources option')].map(o => o.value)`, &suggested)
		assert.Contains(t, suggested, "deployments.apps", "group/resource suggestions from the store")
		assert.Contains(t, suggested, "pods")

		// Old data: the start page searches the stored range instead of the last 2 days.
		old := serve(t, bigDeployment(t, 3), frontend.Config{})
		p.open(old.URL + "/")
		p.waitText(`.results`, "deployments.apps ns/web")
		loc = mustURL(t, p.location())
		assert.Equal(t, "custom", loc.Query().Get("range"))
		assert.Equal(t, "2026-05-01T10:00:00Z", loc.Query().Get("start"), "the oldest window")
		assert.Equal(t, "2026-05-01T10:30:00Z", loc.Query().Get("end"), "the end of the newest window")

		// An empty store explains itself.
		empty := serve(t, memory.New(memory.Config{}, 0), frontend.Config{})
		p.open(empty.URL + "/")
		p.waitText(`.results`, "Search stored traces")
		assert.Equal(t, "/", mustURL(t, p.location()).Path)
	})

	t.Run("KubernetesEvent", func(t *testing.T) {
		sum := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
		tr := getTrace(t, srv.URL, sum.TraceID)
		idx := -1
		for i, l := range rootOf(t, tr).Logs {
			if len(l.Fields) > 0 && l.Fields[0].Key == "event" && l.Fields[0].Value == "ScalingReplicaSet" {
				idx = i
				break
			}
		}
		require.GreaterOrEqual(t, idx, 0, "a ScalingReplicaSet Event on the Deployment")
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID + "?span=" + rootOf(t, tr).SpanID + "&event=" + fmt.Sprint(idx))
		detail := p.waitText(`.event-detail`, "ScalingReplicaSet")
		assert.Contains(t, detail, "Scaled up replica set demo-")
		assert.Contains(t, detail, "A Kubernetes Event reports what a component saw or did")
		var cls string
		p.eval(fmt.Sprintf(`document.querySelector('.row .mk[data-log="%d"]').className`, idx), &cls)
		assert.Contains(t, cls, "event")
		assert.Contains(t, cls, "selected")
	})

	t.Run("SnapshotAndError", func(t *testing.T) {
		sum := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
		root := rootOf(t, getTrace(t, srv.URL, sum.TraceID))
		find := func(field, title string) int {
			for i, l := range root.Logs {
				if len(l.Fields) == 0 || !strings.Contains(fmt.Sprint(l.Fields[0].Value), title) {
					continue
				}
				for _, f := range l.Fields {
					if f.Key == field {
						return i
					}
				}
			}
			t.Fatalf("no %q event with %s", title, field)
			return -1
		}
		p := newPage(t, browser)
		p.open(fmt.Sprintf("%s/trace/%s?span=%s&event=%d", srv.URL, sum.TraceID, root.SpanID, find("snapshot", "admin create")))
		p.waitText(`.event-detail .event-title`, "admin create")
		p.click(`.event-detail details.snapshot > summary`)
		snap := p.waitText(`.event-detail details.snapshot`, `"name": "demo"`)
		assert.Contains(t, snap, `"kind": "Deployment"`, "pretty JSON")
		assert.Contains(t, p.text(`.event-detail dd.code-ok`), "201")

		p.open(fmt.Sprintf("%s/trace/%s?span=%s&event=%d", srv.URL, sum.TraceID, root.SpanID, find("error", "(Conflict)")))
		p.waitText(`.event-detail .event-title`, "update status (Conflict)")
		assert.Contains(t, p.text(`.event-detail .box.error`), "Operation cannot be fulfilled")
		assert.Equal(t, "409", p.text(`.event-detail dd.code-bad`))
	})

	t.Run("RelatedObjectLink", func(t *testing.T) {
		sum := searchOne(t, srv.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 3`)
		p.clickRow("demo-7fb4c846ff-b7qjt", ".op")
		p.waitText(`.detail .node-title`, "demo-7fb4c846ff-b7qjt")
		assert.Contains(t, p.text(`.detail`), "Related objects")
		p.click(`.detail a.own-trace`)
		p.waitJS("the Pod's trace", fmt.Sprintf(`location.pathname.startsWith('/trace/ff21') && location.pathname !== '/trace/%s' && document.querySelectorAll('.row').length > 3`, sum.TraceID))
		assert.Contains(t, p.text(`.row .lbl`), "demo-7fb4c846ff-b7qjt", "the Pod's own trace, in the same mode")
	})

	t.Run("Parsers", func(t *testing.T) {
		p := newPage(t, browser)
		p.open(srv.URL + "/")
		p.waitJS("the UI", `window.kelemetryUI !== undefined`)
		for _, tc := range []struct{ line, path, old, new string }{
			{"spec.replicas 1 -> 2", "spec.replicas", "1", "2"},
			{"status.observedGeneration <none> -> 1", "status.observedGeneration", "<none>", "1"},
			{`metadata.annotations.note "a -> b" -> "c"`, "metadata.annotations.note", `"a -> b"`, `"c"`},
			{`spec.template.spec.containers[name=app].image nginx:1 -> <none>`, "spec.template.spec.containers[name=app].image", "nginx:1", "<none>"},
			{"odd", "odd", "", ""},
		} {
			var got map[string]string
			p.eval(fmt.Sprintf(`kelemetryUI.splitDiff(%s)`, jsStr(tc.line)), &got)
			assert.Equal(t, map[string]string{"path": tc.path, "old": tc.old, "new": tc.new}, got, tc.line)
		}
		for in, want := range map[string]map[string]string{
			"deployments.apps":           {"group": "apps", "resource": "deployments"},
			"apps/deployments":           {"group": "apps", "resource": "deployments"},
			"pods":                       {"group": "", "resource": "pods"},
			"leases.coordination.k8s.io": {"group": "coordination.k8s.io", "resource": "leases"},
			"":                           {"group": "", "resource": ""},
		} {
			var got map[string]string
			p.eval(fmt.Sprintf(`kelemetryUI.parseResource(%s)`, jsStr(in)), &got)
			assert.Equal(t, want, got, in)
		}
		for in, want := range map[string]any{
			"2026-11-29T17:00:00Z":      "2026-11-29T17:00:00.000Z",
			"2026-11-29 17:00":          "2026-11-29T17:00:00.000Z",
			"2026-11-29":                "2026-11-29T00:00:00.000Z",
			"2026-11-29T18:00:00+01:00": "2026-11-29T17:00:00.000Z",
			"yesterday":                 nil,
		} {
			var got any
			p.eval(fmt.Sprintf(`kelemetryUI.parseTimeInput(%s)`, jsStr(in)), &got)
			assert.Equal(t, want, got, in)
		}
	})

	t.Run("EmptyAndBadRange", func(t *testing.T) {
		p := newPage(t, browser)
		p.open(srv.URL + "/search?name=no-such-object&" + rolloutRange())
		msg := p.waitText(`.no-results`, "No matching objects")
		assert.Contains(t, msg, "name no-such-object")

		p.open(srv.URL + "/search?name=demo&range=custom&start=2026-11-29T18:00:00Z&end=2026-11-29T17:00:00Z")
		msg = p.waitText(`.bad-range`, "Bad time range")
		assert.Contains(t, msg, "is not after the start")

		p.open(srv.URL + "/search?resource=deployments&attrs=user%3Dnobody&" + rolloutRange())
		msg = p.waitText(`.no-results`, "No matching objects")
		assert.Contains(t, msg, "event attributes user=nobody")
		p.open(srv.URL + "/search?resource=deployments&attrs=user%3Dadmin&" + rolloutRange())
		p.waitText(`.results`, "deployments.apps default/demo")
		p.open(srv.URL + "/search?resource=deployments&attrs=user%3D%22admin&" + rolloutRange())
		msg = p.waitText(`.msg.error`, "the server rejected the request (HTTP 400)")
		assert.Contains(t, msg, "unterminated quote")

		p.open(srv.URL + "/search?name=demo&range=custom&start=yesterday")
		p.waitText(`.bad-range`, `"yesterday" is not a time`)

		p.open(srv.URL + "/trace/ff2100000000000000000e10deadbeef")
		p.waitText(`.msg`, "Trace not found")
	})

	t.Run("BackendError", func(t *testing.T) {
		bad := serve(t, failingReader{st}, frontend.Config{})
		p := newPage(t, browser)
		p.open(bad.URL + "/search?name=demo&" + rolloutRange())
		msg := p.waitText(`.msg.error`, "the backend failed (HTTP 500)")
		assert.Contains(t, msg, "disk on fire")
		p.open(bad.URL + "/trace/ff2100000000000000000e10deadbeef")
		p.waitText(`.msg.error`, "the backend failed (HTTP 500)")
	})

	t.Run("TruncatedBanner", func(t *testing.T) {
		// A span budget of 40 over a Deployment with 50 Pods: the search and the trace say so.
		const msg = "result truncated: span budget of 40 reached; narrow the time range"
		small := serve(t, bigDeployment(t, 50), frontend.Config{MaxSpans: 40})
		p := newPage(t, browser)
		p.open(small.URL + "/search?resource=deployments&name=web&range=custom&start=" + synthWindow.Format(time.RFC3339) +
			"&end=" + synthWindow.Add(30*time.Minute).Format(time.RFC3339))
		assert.Contains(t, p.waitText(`.results .msg.truncated`, msg), msg)
		p.click(`.results a[href^="/trace/"]`)
		assert.Contains(t, p.waitText(`.msg.truncated`, msg), msg)
		var visible bool
		p.eval(`(() => { const b = document.querySelector('.msg.truncated'); const r = b.getBoundingClientRect();
			return r.height > 0 && getComputedStyle(b).display !== 'none'; })()`, &visible)
		assert.True(t, visible, "the banner is visible")
		assert.NotContains(t, p.text(`.tracebar`), msg)

		// Within the budget: no banner.
		full := serve(t, bigDeployment(t, 50), frontend.Config{})
		p.open(full.URL + "/search?resource=deployments&name=web&range=custom&start=" + synthWindow.Format(time.RFC3339) +
			"&end=" + synthWindow.Add(30*time.Minute).Format(time.RFC3339))
		p.waitJS("results", `document.querySelector('.results a[href^="/trace/"]') !== null`)
		var banners int
		p.eval(`document.querySelectorAll('.msg.truncated').length`, &banners)
		assert.Zero(t, banners)
	})

	t.Run("ThousandPods", func(t *testing.T) {
		// 1,100 Pods and budgets that take 1,000 of them: the rest is an omission marker.
		big := serve(t, bigDeployment(t, 1100), frontend.Config{PerLevel: 1000, Total: 1001})
		sum := searchOne(t, big.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "web"},
			synthWindow, synthWindow.Add(30*time.Minute))
		require.Equal(t, 1002, sum.Objects)
		require.Equal(t, 100, sum.Omitted)
		p := newPage(t, browser)
		start := time.Now()
		p.open(big.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 0`)
		assert.Less(t, time.Since(start), 15*time.Second, "a 1,000-Pod trace renders promptly")
		var total, rendered int
		p.eval(`kelemetryUI.rowCount()`, &total)
		p.eval(`kelemetryUI.renderedRows()`, &rendered)
		assert.Equal(t, 1003, total, "Deployment, ReplicaSet, 1,000 Pods, one omission marker")
		assert.Less(t, rendered, 150, "rows are virtualised")
		assert.Contains(t, p.text(`.tracebar`), "100 omitted")

		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelector('.rows'); r.scrollTop = r.scrollHeight; })()`))
		p.waitText(`.row .lbl`, "web-1-0999")
		assert.Contains(t, p.text(`.row.kind-omitted`), "100 more objects omitted")
		p.screenshot("ui-1000-pods.png", false)
		p.eval(`kelemetryUI.renderedRows()`, &rendered)
		assert.Less(t, rendered, 150, "still virtualised at the bottom")

		// Collapsing the ReplicaSet folds 1,001 rows at once.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.rows').scrollTop = 0`))
		p.waitText(`.row .lbl`, "replicasets")
		p.clickRow("replicasets", ".toggle")
		p.eval(`kelemetryUI.rowCount()`, &total)
		assert.Equal(t, 2, total)
	})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// splitLine cuts a diff line "<path> <old> -> <new>" whose values hold no " -> ".
func splitLine(t *testing.T, line, path string) (string, string) {
	t.Helper()
	rest, ok := strings.CutPrefix(line, path+" ")
	require.True(t, ok, line)
	old, nw, ok := strings.Cut(rest, " -> ")
	require.True(t, ok, line)
	return old, nw
}
