package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
)

// warningDeployment stores a Deployment with one audit write and one Kubernetes Warning Event,
// shaped as event.Converter writes it (Error set, kelemetry.event.type=Warning, a message log).
func warningDeployment(t testing.TB) *memory.Store {
	t.Helper()
	var s synth
	dep := synthObj("deployments", "web")
	s.object(dep)
	s.event(dep, time.Minute, "d")
	tid := aggregator.TraceIDFor(dep.Key(), synthWindow)
	at := synthWindow.Add(2 * time.Minute)
	s.spans = append(s.spans, &aggregator.Span{TraceID: tid, SpanID: aggregator.EventSpanID(tid, "event", "w"),
		ParentID: aggregator.ObjectSpanID(tid), Kind: aggregator.KindEvent, Source: "event", Name: "FailedCreate",
		Object: dep, Window: synthWindow, Start: at, End: at, Error: true,
		Attributes: aggregator.Attrs{{Key: "kelemetry.event.reason", Value: "FailedCreate"}, {Key: "kelemetry.event.type", Value: "Warning"}},
		Logs:       []aggregator.Log{{Time: at, Type: aggregator.LogTypeMessage, Message: `pods "web-1" is forbidden: exceeded quota`}}})
	st := memory.New(memory.Config{}, 0)
	require.NoError(t, st.Export(context.Background(), s.spans))
	return st
}

// The hostile trace: markup in every data field, a very long name, a synthetic root, a span
// whose parent is missing, spans without tags or start times, and every timed span at one
// instant (a zero-length trace).
var (
	hostileAt = time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC).UnixMicro()
	xssName   = `<img src=x onerror="window.__xss=1">`
	longName  = strings.Repeat("verylongpodname", 25) + "end" // no break opportunity
	hostileID = "ff210000000000000000000000000abc"
	kv        = func(k string, v any) query.JaegerKeyValue {
		return query.JaegerKeyValue{Key: k, Type: "string", Value: v}
	}
	childOf = func(id string) []query.JaegerReference {
		return []query.JaegerReference{{RefType: "CHILD_OF", SpanID: id}}
	}
	hostileSnap = `{"metadata":{"name":"<img src=y onerror=\"window.__xss=3\">"}}`
)

func hostileTrace() query.JaegerTrace {
	return query.JaegerTrace{TraceID: hostileID[:32], Processes: map[string]query.JaegerProcess{
		"p1": {ServiceName: "kelemetry"}, "p2": {ServiceName: `object<script>window.__xss=4</script>`}},
		Spans: []query.JaegerSpan{
			{SpanID: "r", OperationName: "2 related objects", ProcessID: "p1", StartTime: hostileAt,
				Tags: []query.JaegerKeyValue{kv("kelemetry.span.kind", "root")}},
			{SpanID: "a", OperationName: "pods/" + xssName + longName, ProcessID: "p2", StartTime: hostileAt, References: childOf("r"),
				Tags: []query.JaegerKeyValue{kv("kelemetry.span.kind", "object"), kv("cluster", "c"), kv("resource", "pods"),
					kv("namespace", "ns"), kv("name", xssName+longName)},
				Logs: []query.JaegerLog{{Timestamp: hostileAt, Fields: []query.JaegerKeyValue{
					kv("audit", `<script>window.__xss=2</script> update`), kv("user", `<b>bob</b>`),
					kv("diff", `metadata.labels.x <none> -> "<img src=z onerror=window.__xss=5>"`),
					kv("snapshot", hostileSnap), kv("message", "<i>hi</i>")}}}},
			// No tags, no start time, a parent that is not in the trace.
			{SpanID: "b", OperationName: "orphan", ProcessID: "p1", References: childOf("missing")},
			// No start time, under a timed parent.
			{SpanID: "c", OperationName: "untimed", ProcessID: "p2", References: childOf("a"), StartTime: -62135596800000000,
				Tags: []query.JaegerKeyValue{kv("kelemetry.span.kind", "object")}},
		}}
}

func hostileServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	ui.Register(mux)
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": v})
	}
	mux.HandleFunc("GET /api/traces/{id}", func(w http.ResponseWriter, _ *http.Request) {
		write(w, []query.JaegerTrace{hostileTrace()})
	})
	mux.HandleFunc("GET /api/ui/suggestions", func(w http.ResponseWriter, _ *http.Request) {
		write(w, map[string]any{"clusters": []string{xssName}, "resources": []any{}, "namespaces": []string{}})
	})
	mux.HandleFunc("GET /api/ui/search", func(w http.ResponseWriter, _ *http.Request) {
		obj := query.SummaryObject{Cluster: xssName, Resource: "pods", Namespace: "ns", Name: xssName + longName}
		write(w, []query.SearchSummary{{TraceID: hostileID, Root: obj, Seed: obj, Roots: 1, Objects: 1,
			Start: time.UnixMicro(hostileAt), End: time.UnixMicro(hostileAt), Clusters: []string{xssName}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// noOverflow checks that nothing is wider than the window or than the detail panel.
func (p *page) noOverflow(what string) {
	p.t.Helper()
	var widths map[string]int
	p.eval(`(() => { const d = document.querySelector('.detail'), r = document.querySelector('.results');
		return { page: document.documentElement.scrollWidth, win: innerWidth,
		detail: d && !d.hidden ? d.scrollWidth - d.clientWidth : 0, results: r ? r.scrollWidth - r.clientWidth : 0 }; })()`, &widths)
	assert.LessOrEqual(p.t, widths["page"], widths["win"], "%s: the page is wider than the window", what)
	assert.LessOrEqual(p.t, widths["detail"], 1, "%s: the detail panel scrolls sideways", what)
	assert.LessOrEqual(p.t, widths["results"], 1, "%s: the result list scrolls sideways", what)
}

func (p *page) noInjection(what string) {
	p.t.Helper()
	var got map[string]any
	p.eval(`({ xss: window.__xss === undefined ? null : window.__xss,
		tags: document.querySelectorAll('#app img, #app script, #app b, #app i').length })`, &got)
	assert.Equal(p.t, map[string]any{"xss": nil, "tags": float64(0)}, got, "%s: data became markup", what)
}

func TestBrowserReview(t *testing.T) {
	browser := newBrowser(t)

	t.Run("HostileAndPartialTrace", func(t *testing.T) {
		srv := hostileServer(t)
		p := newPage(t, browser)
		p.open(srv.URL + "/search?name=x&range=7d")
		p.waitJS("a result", `document.querySelector('a.result') !== null`)
		p.noInjection("search results")
		p.noOverflow("search results")
		assert.Contains(t, p.text(`.results h2`), "UTC", "the searched range says its zone")
		assert.Contains(t, p.text(`a.result`), "UTC")

		p.open(srv.URL + "/trace/" + hostileID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 0`)
		var n int
		p.eval(`kelemetryUI.rowCount()`, &n)
		assert.Equal(t, 4, n, "synthetic root, its object, the untimed child and the orphan (a root of its own)")
		axis := p.text(`.axis .lbl`)
		assert.Contains(t, axis, "2026-11-29 17:00:00.000 UTC", "spans without a start time do not move the scale to 1970 or year 1")
		var ticks []string
		p.eval(`[...document.querySelectorAll('.axis .tick')].map(t => t.innerText)`, &ticks)
		assert.GreaterOrEqual(t, len(ticks), 4)
		assert.LessOrEqual(t, len(ticks), 10)
		assert.Equal(t, []string{"0", "+200µs", "+400µs", "+600µs", "+800µs"}, ticks, "round steps")
		seen := map[string]bool{}
		for _, tk := range ticks {
			assert.False(t, seen[tk], "a zero-length trace has distinct ticks: %q", ticks)
			seen[tk] = true
		}
		var left []string
		p.eval(`[...document.querySelectorAll('.row .bar')].map(b => b.style.left)`, &left)
		for _, l := range left {
			assert.Equal(t, "0%", l, "all spans at the one instant")
		}

		// innerText stops where the clipped label ends; match on textContent.
		p.do(chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.row')].find(r => r.textContent.includes('verylongpodname')).querySelector('.op').click()`))
		p.waitText(`.detail .node-title`, "end")
		p.noInjection("object detail")
		p.noOverflow("object detail")
		p.click(`.row .mk`)
		p.waitJS("the event", `document.querySelector('.event-detail') !== null`)
		p.click(`.event-detail details.snapshot > summary`)
		p.waitText(`.event-detail details.snapshot`, "window.__xss=3")
		p.noInjection("event detail")
		p.noOverflow("event detail")
		assert.Contains(t, p.text(`.event-detail .event-title`), "<script>")
		assert.Contains(t, p.text(`.event-detail`), "<b>bob</b>")

		// A path that is not UTF-8 once decoded is a bad ID, not a script error.
		p.open(srv.URL + "/trace/%C0%80")
		p.waitText(`.msg`, "Bad trace ID")
	})

	t.Run("WarningEventIsAnError", func(t *testing.T) {
		srv := serve(t, warningDeployment(t), frontend.Config{})
		for _, mode := range []string{"tracing", "tree"} {
			t.Run(mode, func(t *testing.T) {
				sum := searchOne(t, srv.URL, mode, map[string]string{"resource": "deployments", "name": "web"}, synthWindow, synthWindow.Add(30*time.Minute))
				p := newPage(t, browser)
				p.open(srv.URL + "/trace/" + sum.TraceID)
				p.waitJS("rows", `document.querySelectorAll('.row').length > 0`)
				var cls string
				p.eval(`[...document.querySelectorAll('.row .mk')].find(m => m.title.includes('FailedCreate')).className`, &cls)
				assert.Contains(t, cls, "error", "a Warning Event's marker is red")
				var audit string
				p.eval(`[...document.querySelectorAll('.row .mk')].find(m => m.title.includes('alice')).className`, &audit)
				assert.NotContains(t, audit, "error")

				p.clickRow("deployments", ".op")
				p.waitText(`.detail .node-title`, "web")
				var rowCls string
				p.eval(`[...document.querySelectorAll('.detail tr.event-row')].find(r => r.innerText.includes('FailedCreate')).className`, &rowCls)
				assert.Contains(t, rowCls, "error", "the Warning Event is red in the object's event list")

				p.do(chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('.row .mk')].find(m => m.title.includes('FailedCreate')).click()`))
				p.waitText(`.event-detail .event-title`, "FailedCreate")
				assert.Contains(t, p.text(`.event-detail .box.error`), "exceeded quota", "the Warning's message is shown as its error")
				assert.NotContains(t, p.text(`.event-detail`), "the request failed", "a Warning Event is not a failed request")
				assert.Contains(t, p.text(`.event-detail dd.code-bad`), "Warning")
			})
		}
	})

	t.Run("BackAndForward", func(t *testing.T) {
		srv := serve(t, bigDeployment(t, 5), frontend.Config{})
		p := newPage(t, browser)
		p.open(srv.URL + "/search?resource=deployments.apps&name=web&range=custom&start=2026-05-01T10:00:00Z&end=2026-05-01T10:30:00Z")
		p.waitText(`.results`, "deployments.apps ns/web")
		p.click(`a.result`)
		p.waitJS("the trace", `document.querySelectorAll('.row').length > 3`)
		p.clickRow("web-1-0003", ".op")
		p.waitText(`.detail .node-title`, "web-1-0003")
		trace := p.location()
		assert.Contains(t, trace, "span=")

		p.do(chromedp.Evaluate[chromedp.Void](`history.back()`))
		p.waitText(`.results`, "deployments.apps ns/web")
		var name string
		p.eval(`document.querySelector('form.filters input[name=name]').value`, &name)
		assert.Equal(t, "web", name, "the search form is restored from the URL")

		p.do(chromedp.Evaluate[chromedp.Void](`history.forward()`))
		p.waitText(`.detail .node-title`, "web-1-0003")
		assert.Equal(t, trace, p.location())
		p.waitJS("the selected row", `document.querySelector('.row.selected') !== null && document.querySelector('.row.selected').innerText.includes('web-1-0003')`)

		// Back from a mode switch restores the previous mode.
		p.do(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('select.mode-display'); s.value = 'tree'; s.dispatchEvent(new Event('change')); })()`))
		p.waitJS("tree mode", `document.querySelectorAll('.row.kind-event').length > 0`)
		p.do(chromedp.Evaluate[chromedp.Void](`history.back()`))
		p.waitJS("tracing mode again", `location.pathname.startsWith('/trace/ff21') && document.querySelectorAll('.row').length > 3 && document.querySelectorAll('.row.kind-event').length === 0`)
		var display string
		p.eval(`document.querySelector('select.mode-display').value`, &display)
		assert.Equal(t, "tracing", display)
	})

	t.Run("Keyboard", func(t *testing.T) {
		srv := serve(t, bigDeployment(t, 5), frontend.Config{})
		sum := searchOne(t, srv.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "web"}, synthWindow, synthWindow.Add(30*time.Minute))
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 3`)
		var tabbable bool
		p.eval(`[...document.querySelectorAll('.row')].every(r => r.tabIndex === 0)`, &tabbable)
		assert.True(t, tabbable, "rows are in the Tab order")

		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.row').focus()`))
		p.do(chromedp.KeyEvent(kb.ArrowDown))
		var focused map[string]string
		p.eval(`({ index: document.activeElement.dataset.index, text: document.activeElement.innerText })`, &focused)
		assert.Equal(t, "1", focused["index"], "ArrowDown moves to the next row")
		p.do(chromedp.KeyEvent(kb.Enter))
		p.waitText(`.detail .node-title`, "replicasets")
		p.eval(`({ index: document.activeElement.dataset.index || '', text: '' })`, &focused)
		assert.Equal(t, "1", focused["index"], "the focus survives the redraw after Enter")

		// Enter on an event of the object's list opens it.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.detail tr.event-row').focus()`))
		p.do(chromedp.KeyEvent(kb.Enter))
		p.waitJS("the event", `document.querySelector('.event-detail') !== null`)

		// A marker is a button: focus and Enter.
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('.row:not(.selected) .mk').focus()`))
		var want string
		p.eval(`document.activeElement.title.split(' ').slice(2).join(' ')`, &want)
		p.do(chromedp.KeyEvent(kb.Enter))
		p.waitText(`.event-detail .event-title`, want)
	})

	t.Run("CollapseAllInURL", func(t *testing.T) {
		// Tree mode: 60 Pods with event rows, 61 collapsible rows (more than the URL lists).
		srv := serve(t, bigDeployment(t, 60), frontend.Config{})
		sum := searchOne(t, srv.URL, "tree [full tree]", map[string]string{"resource": "deployments", "name": "web"}, synthWindow, synthWindow.Add(30*time.Minute))
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 3`)
		p.click(`button.collapse-all`)
		var n int
		p.eval(`kelemetryUI.rowCount()`, &n)
		assert.Equal(t, "all", mustURL(t, p.location()).Query().Get("collapsed"), "the URL holds the collapsed rows")
		q := newPage(t, browser)
		q.open(p.location())
		q.waitJS("rows", `document.querySelectorAll('.row').length > 0`)
		var m int
		q.eval(`kelemetryUI.rowCount()`, &m)
		assert.Equal(t, n, m, "a shared URL shows the same rows")
	})

	t.Run("ScrollReusesRows", func(t *testing.T) {
		srv := serve(t, bigDeployment(t, 400), frontend.Config{})
		sum := searchOne(t, srv.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "web"}, synthWindow, synthWindow.Add(30*time.Minute))
		p := newPage(t, browser)
		p.open(srv.URL + "/trace/" + sum.TraceID)
		p.waitJS("rows", `document.querySelectorAll('.row').length > 3`)
		// The critical path's answer redraws every row to mark the path: wait for it first.
		p.waitJS("the critical path", `!document.querySelector('details.critical summary').innerText.includes('loading')`)
		p.do(chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('.row').forEach(r => { r.__seen = true; });
			document.querySelector('.rows').scrollTop += 5 * 24;`))
		p.waitJS("rows below", `[...document.querySelectorAll('.row')].some(r => !r.__seen)`)
		var kept, total int
		p.eval(`[...document.querySelectorAll('.row')].filter(r => r.__seen).length`, &kept)
		p.eval(`document.querySelectorAll('.row').length`, &total)
		assert.Greater(t, kept, total/2, "a small scroll keeps the rows already drawn")
		var ordered bool
		p.eval(`(() => { const ix = [...document.querySelectorAll('.row')].map(r => Number(r.dataset.index)); return ix.every((x, i) => i === 0 || x === ix[i-1] + 1); })()`, &ordered)
		assert.True(t, ordered, "rows stay in index order (the Tab order)")
	})
}
