package ui_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/store/memory"
)

// moment is one entry of GET /api/objects/history.
type moment struct {
	Time  string `json:"time"`
	Event string `json:"event"`
}

// objectAPI asks the native API about the rollout's Deployment.
func objectAPI(t *testing.T, srvURL, what string, extra url.Values, v any) {
	t.Helper()
	q := url.Values{"cluster": {"test"}, "group": {"apps"}, "resource": {"deployments"}, "namespace": {"default"}, "name": {"demo"}}
	for k, vs := range extra {
		q[k] = vs
	}
	getJSON(t, srvURL+"/api/objects/"+what+"?"+q.Encode(), v)
}

// setSlider moves the history slider to position i as a user would (an input event).
func (p *page) setSlider(i int) {
	p.t.Helper()
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const s = document.querySelector('.history-slider'); if (!s) return false;
		s.value = %q; s.dispatchEvent(new Event('input', { bubbles: true })); return true; })()`, fmt.Sprint(i)), &ok)
	require.True(p.t, ok, "no history slider")
	p.waitJS(fmt.Sprintf("the object at moment %d", i), fmt.Sprintf(`kelemetryUI.historyShown() === %d`, i))
}

// TestBrowserObjectSlider opens the Deployment's panel, and checks that the time slider steps
// through the object's stored writes, showing the object the API reconstructs at each, and
// the changes between two moments.
func TestBrowserObjectSlider(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	srv := serve(t, st, frontend.Config{})

	sum := searchOne(t, srv.URL, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
	tr := getTrace(t, srv.URL, sum.TraceID)
	var depSpan string
	for _, s := range tr.Spans {
		tags := map[string]any{}
		for _, kv := range s.Tags {
			tags[kv.Key] = kv.Value
		}
		if tags["resource"] == "deployments" && tags["name"] == "demo" && tags["kelemetry.span.kind"] == "object" {
			depSpan = s.SpanID
		}
	}
	require.NotEmpty(t, depSpan, "the Deployment's row")

	var hist struct {
		Moments []moment `json:"moments"`
	}
	objectAPI(t, srv.URL, "history", nil, &hist)
	m := hist.Moments
	require.Greater(t, len(m), 2, "the Deployment was written several times")
	rvAt := func(i int) string {
		var s struct {
			Source struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"source"`
		}
		objectAPI(t, srv.URL, "at", url.Values{"time": {m[i].Time}}, &s)
		return s.Source.ResourceVersion
	}
	first, last := rvAt(0), rvAt(len(m)-1)
	require.NotEmpty(t, first)
	require.NotEqual(t, first, last)

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + sum.TraceID + "?span=" + depSpan)
	p.waitText(`.node-detail .node-title`, "demo")
	p.click(`details.history summary`)
	p.waitJS("the object at the last moment", `kelemetryUI.historyShown() >= 0`)
	var max int
	p.eval(`Number(document.querySelector('.history-slider').max)`, &max)
	assert.Equal(t, len(m)-1, max, "one slider position per stored write")
	assert.Equal(t, len(m)-1, p.evalInt(`kelemetryUI.historyShown()`), "the slider starts at the newest moment")
	assert.Contains(t, p.text(`.history-source`), "resourceVersion "+last)
	assert.Contains(t, p.text(`.history-moment`), m[len(m)-1].Event)

	// The slider changes the shown object: the first moment is the creation.
	p.setSlider(0)
	assert.Contains(t, p.text(`.history-source`), "resourceVersion "+first)
	assert.Contains(t, p.text(`.history-moment`), fmt.Sprintf("Moment 1 of %d", len(m)))
	assert.Contains(t, p.text(`.history-diff`), "Pick another moment", "a moment compared with itself")

	// Between two moments: the changes the API's diff names.
	mid := len(m) / 2
	var d struct {
		Changes []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	objectAPI(t, srv.URL, "diff", url.Values{"from": {m[0].Time}, "to": {m[mid].Time}}, &d)
	require.NotEmpty(t, d.Changes)
	p.setSlider(mid)
	var shown []string
	p.eval(`[...document.querySelectorAll('.history-diff td.path')].map(e => e.innerText)`, &shown)
	var want []string
	for _, c := range d.Changes {
		want = append(want, c.Path)
	}
	assert.Equal(t, want, shown)
	assert.Contains(t, p.text(`.history-diff h3`), fmt.Sprintf("from moment 1 to %d", mid+1))
	assert.Contains(t, p.text(`.history-source`), "resourceVersion "+rvAt(mid))
	// The chart marks the moment.
	var line struct{ X, Lo, Hi float64 }
	p.eval(`(() => { const l = document.querySelector('.gantt .moment-line').getBoundingClientRect(), tl = document.querySelector('.axis .tl').getBoundingClientRect();
		return { X: l.left, Lo: tl.left, Hi: tl.right }; })()`, &line)
	assert.True(t, line.X > line.Lo && line.X < line.Hi, "the moment's line lies on the time axis: %+v", line)
	p.screenshot("ui-slider.png", true)

	// The URL holds the slider's moment and the compare moment (1-based), and the open
	// critical path panel: the same link opens the same view.
	loc := p.location()
	assert.Contains(t, loc, fmt.Sprintf("moment=%d", mid+1))
	assert.Contains(t, loc, "compare=1")
	p.click(`details.critical summary`)
	p.waitJS("the panel in the URL", `location.search.includes('critical=open')`)
	loc = p.location()
	q := newPage(t, browser)
	q.open(loc)
	q.waitJS("the slider from the link", fmt.Sprintf(`kelemetryUI.historyShown() === %d`, mid))
	assert.Contains(t, q.text(`.history-diff h3`), fmt.Sprintf("from moment 1 to %d", mid+1))
	assert.True(t, q.evalBool(`document.querySelector('details.critical').open`), "the critical path panel open from the link")
	// Another moment to compare with is kept too.
	q.eval(`(() => { const s = document.querySelector('.history-from'); s.value = '1'; s.dispatchEvent(new Event('change')); return true; })()`, new(bool))
	q.waitJS("compare in the URL", `location.search.includes('compare=2')`)
}

// TestBrowserMergeUnrelated selects a Node and a Pod (no linker relates them) among the search
// results, opens them as one view, and reloads its URL.
func TestBrowserMergeUnrelated(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	srv := serve(t, st, frontend.Config{})
	node := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "nodes", "name": "kwok-node-1"}, rolloutFrom, rolloutTo)
	pod := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "pods", "name": "demo-7fb4c846ff-b7qjt"}, rolloutFrom, rolloutTo)

	p := newPage(t, browser)
	p.open(srv.URL + "/search?" + rolloutRange() + "&link=none&limit=200")
	p.waitJS("the result list", `document.querySelectorAll('.result-item input.pick').length > 2`)
	assert.True(t, p.evalBool(`document.querySelector('button.merge-open').disabled`), "nothing to merge yet")
	for _, label := range []string{"nodes kwok-node-1", "pods default/demo-7fb4c846ff-b7qjt"} {
		var ok bool
		p.eval(fmt.Sprintf(`(() => { const b = [...document.querySelectorAll('.result-item input.pick')].find(b => b.getAttribute('aria-label').includes(%s));
			if (!b) return false; b.click(); return true; })()`, jsStr(label)), &ok)
		require.True(t, ok, "no result %q", label)
	}
	assert.Contains(t, p.text(`.merge-bar`), "2 results selected")
	p.click(`button.merge-open`)
	p.waitJS("the merged view", `document.querySelector('.merge-members') !== null && document.querySelectorAll('.row').length > 2`)

	// The URL holds the set; the merged view shows both objects on one axis.
	loc := p.location()
	ids := strings.TrimPrefix(loc[strings.Index(loc, "/trace/"):], "/trace/")
	members := map[string]bool{}
	for i := 0; i+32 <= len(ids); i += 32 {
		members[ids[i:i+32]] = true
	}
	assert.Equal(t, map[string]bool{pad32(node.TraceID): true, pad32(pod.TraceID): true}, members, loc)
	check := func() {
		t.Helper()
		rows := p.text(`.row .lbl`)
		assert.Contains(t, rows, "kwok-node-1")
		assert.Contains(t, rows, "demo-7fb4c846ff-b7qjt")
		assert.Contains(t, p.text(`.trace-title`), "Merged view of 2 traces")
		assert.Contains(t, p.text(`.tracebar .facts`), "2 objects", "the merge's root is no object")
		assert.Equal(t, 2, p.evalInt(`document.querySelectorAll('.merge-members .member').length`))
		// One axis: the merged root's bar spans the whole chart, and each member's bar lies on it.
		var bars []float64
		p.eval(`[...document.querySelectorAll('.row')].map(r => { const b = r.querySelector('.bar'), tl = r.querySelector('.tl').getBoundingClientRect(), bb = b.getBoundingClientRect();
			return [(bb.left - tl.left) / tl.width, (bb.right - tl.left) / tl.width]; }).flat()`, &bars)
		require.NotEmpty(t, bars)
		assert.InDelta(t, 0, bars[0], 0.01, "the root starts the axis")
		assert.InDelta(t, 1, bars[1], 0.01, "the root ends the axis")
		for _, x := range bars {
			assert.True(t, x > -0.01 && x < 1.01, "a bar off the axis: %v", bars)
		}
	}
	check()
	// The critical path is analysed over both members as one graph: nothing ties the Node's
	// heartbeats to the Pod's writes, so the panel says there is no critical path instead of
	// blaming a controller for the gap, and nothing is marked on the chart.
	summary := p.waitText(`details.critical summary`, "critical path")
	assert.Contains(t, summary, "No critical path: no write here reacted to a write of another object")
	assert.Zero(t, p.evalInt(`document.querySelectorAll('.row.on-path').length`))
	p.screenshot("ui-merge.png", true)

	// Shareable: the same URL opened afresh draws the same view.
	p.open(loc)
	p.waitJS("the merged view after a reload", `document.querySelector('.merge-members') !== null && document.querySelectorAll('.row').length > 2`)
	check()
	// A member opens alone from the bar.
	p.click(`.merge-members .member a`)
	p.waitJS("a member alone", `document.querySelector('.merge-members') === null && document.querySelectorAll('.row').length > 0`)
	assert.NotContains(t, p.location(), ids)
}

func pad32(id string) string { return strings.Repeat("0", 32-len(id)) + id }

func (p *page) evalInt(expr string) int {
	p.t.Helper()
	var n int
	p.eval(expr, &n)
	return n
}

func (p *page) evalBool(expr string) bool {
	p.t.Helper()
	var b bool
	p.eval(expr, &b)
	return b
}

// TestBrowserSliderRedacted steps the slider over a Secret's writes: its data shows as
// redaction markers at every moment and in the diff, never as the plain or base64 values.
func TestBrowserSliderRedacted(t *testing.T) {
	browser := newBrowser(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	secrets := []string{"hunter2", "hunter3", "tok-1"}
	var lines []string
	for i, data := range []map[string]string{{"password": secrets[0]}, {"password": secrets[1], "token": secrets[2]}} {
		enc := map[string]string{}
		for k, v := range data {
			enc[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		body, err := json.Marshal(map[string]any{"kind": "Secret", "apiVersion": "v1", "type": "Opaque", "data": enc,
			"metadata": map[string]any{"name": "creds", "namespace": "default", "uid": "u-1", "resourceVersion": fmt.Sprint(10 + i)}})
		require.NoError(t, err)
		verb, code := "create", 201
		if i > 0 {
			verb, code = "update", 200
		}
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		lines = append(lines, fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"s%d","stage":"ResponseComplete",`+
			`"requestURI":"/api/v1/namespaces/default/secrets/creds","verb":%q,"user":{"username":"alice"},"sourceIPs":["127.0.0.1"],`+
			`"objectRef":{"resource":"secrets","namespace":"default","name":"creds","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":%d},`+
			`"requestObject":%s,"responseObject":%s,"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			i, verb, code, body, body, at.Add(-time.Millisecond).Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	st := memory.New(memory.Config{}, 0)
	require.NoError(t, audittest.ReplayFile(ctx, audittest.Config{Deps: aggregator.Deps{Sinks: []aggregator.Sink{st}}}, path))
	srv := serve(t, st, frontend.Config{})
	sum := searchOne(t, srv.URL, "tracing", map[string]string{"resource": "secrets", "name": "creds"}, t0.Add(-time.Hour), t0.Add(time.Hour))

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + sum.TraceID)
	p.waitJS("the Secret's row", `[...document.querySelectorAll('.row .lbl')].some(e => e.innerText.includes('creds'))`)
	p.clickRow("creds", ".op")
	p.click(`details.history summary`)
	p.waitJS("the Secret at its last write", `kelemetryUI.historyShown() === 1`)
	noSecret := func(what string) {
		t.Helper()
		// Every shown node of the JSON tree, folded or not, and the diff.
		shown := p.text(`.history-state`) + p.text(`.history-diff`) + p.text(`.history-moment`)
		var html string
		p.eval(`document.querySelector('.detail').innerHTML`, &html)
		for _, s := range secrets {
			for _, v := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
				assert.NotContains(t, shown, v, what)
				assert.NotContains(t, html, v, what)
			}
		}
		assert.Contains(t, shown, "<redacted", what)
	}
	noSecret("the last write")
	p.setSlider(0)
	noSecret("the creation")
	p.eval(`(() => { const s = document.querySelector('.history-from'); s.value = '1'; s.dispatchEvent(new Event('change')); return true; })()`, new(bool))
	p.waitText(`.history-diff h3`, "from moment 1 to 2")
	var paths []string
	p.eval(`[...document.querySelectorAll('.history-diff td.path')].map(e => e.innerText)`, &paths)
	assert.ElementsMatch(t, []string{"data.password", "data.token"}, paths)
	noSecret("the diff")
}
