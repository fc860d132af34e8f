package ui_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/audit/apitrace"
	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/internal/audittest"
	"github.com/kelemetry/kelemetry/internal/frontendtest"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/store/memory"
	"github.com/kelemetry/kelemetry/telemetry"
)

// The apiserver-traces fixture: a Deployment of 3 replicas on a control plane with tracing on
// and a validating webhook that holds every Pod create 1.5 s (e2e TestAPIServerTraces).
var (
	tracesAudit = filepath.Join("..", "..", "testdata", "apiserver-traces", "audit.jsonl")
	tracesSpans = filepath.Join("..", "..", "testdata", "apiserver-traces", "apiserver-spans.jsonl")
)

// ingestWithTraces replays the recorded request spans, then the audit log, through the join into
// a memory store.
func ingestWithTraces(t testing.TB) *memory.Store {
	t.Helper()
	ctx := context.Background()
	st := memory.New(memory.Config{}, 0)
	join, err := apitrace.New(apitrace.Config{Enabled: true, Replay: []string{tracesSpans}}, telemetry.Settings{})
	require.NoError(t, err)
	p, err := audittest.Start(ctx, audittest.Config{Deps: aggregator.Deps{
		Sinks: []aggregator.Sink{st}, Linkers: frontendtest.Linkers(), Decorators: []aggregator.Decorator{join.Decorator()},
	}})
	require.NoError(t, err)
	join.SetExporter(p.Engine)
	require.NoError(t, join.Start(ctx))
	require.NoError(t, join.Flush(ctx))
	_, err = p.HandleFile(ctx, tracesAudit)
	require.NoError(t, err)
	// The consumer's workers send the events: once they stopped, every event span was seen.
	require.NoError(t, p.Consumer.Stop(ctx))
	require.NoError(t, join.Flush(ctx))
	require.NoError(t, join.Stop(ctx))
	require.NoError(t, p.Stop(ctx))
	return st
}

// TestBrowserAPIServerTraces: a Pod create's detail draws kube-apiserver's spans of the request
// as a waterfall, the webhook that held it 1.5 s marked as the slow part; the critical path's
// headline names the webhook.
func TestBrowserAPIServerTraces(t *testing.T) {
	browser := newBrowser(t)
	srv := serve(t, ingestWithTraces(t), frontend.Config{})
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var sums []query.SearchSummary
	q := url.Values{"service": {"tracing [full tree]"}, "tags": {`{"resource":"deployments","name":"web"}`},
		"start": {strconv.FormatInt(day.UnixMicro(), 10)}, "end": {strconv.FormatInt(day.Add(30*24*time.Hour).UnixMicro(), 10)}}
	getJSON(t, srv.URL+"/api/ui/search?"+q.Encode(), &sums)
	require.Len(t, sums, 1)
	tr := getTrace(t, srv.URL, sums[0].TraceID)
	spanID, index := "", -1
	for _, sp := range tr.Spans {
		for i, l := range sp.Logs {
			if len(l.Fields) == 0 || !strings.HasSuffix(l.Fields[0].Key, "audit") || !strings.HasSuffix(l.Fields[0].Value.(string), "replicaset-controller create") {
				continue
			}
			for _, f := range l.Fields {
				if f.Key == "request" && spanID == "" {
					spanID, index = sp.SpanID, i
				}
			}
		}
	}
	require.NotEmpty(t, spanID, "a Pod create folded with its request")

	p := newPage(t, browser)
	p.open(srv.URL + "/trace/" + sums[0].TraceID + "?span=" + spanID + "&event=" + strconv.Itoa(index))
	p.waitText(`.event-detail h3`, "Inside the API server")
	slow := p.waitText(`.waterfall tr.slow .wf-name`, "validating webhook delay.e2e.kelemetry.dev")
	assert.Equal(t, "validating webhook delay.e2e.kelemetry.dev", slow)
	dur := p.text(`.waterfall tr.slow .wf-dur`)
	assert.True(t, strings.HasPrefix(dur, "1.5"), "the webhook's time: %s", dur)
	var rows int
	p.eval(`document.querySelectorAll('.waterfall tr').length`, &rows)
	assert.GreaterOrEqual(t, rows, 4, "the HTTP span, the handler, the webhook call, etcd")
	// The bar of the webhook covers most of the request.
	var width float64
	p.eval(`parseFloat(document.querySelector('.waterfall tr.slow .wf-bar span').style.width)`, &width)
	assert.Greater(t, width, 80.0)
	p.waitText(`.critical summary`, "validating webhook delay.e2e.kelemetry.dev")
	p.screenshot("ui-apiserver-traces.png", true)

	// The tree mode draws the request's spans as rows under the event; one opens into its part.
	q.Set("service", "tree [full tree]")
	getJSON(t, srv.URL+"/api/ui/search?"+q.Encode(), &sums)
	require.Len(t, sums, 1)
	tree := getTrace(t, srv.URL, sums[0].TraceID)
	hook := ""
	for _, sp := range tree.Spans {
		if sp.OperationName == "Call validating webhook" {
			hook = sp.SpanID
			break
		}
	}
	require.NotEmpty(t, hook, "the webhook call is a span of the tree mode")
	p.open(srv.URL + "/trace/" + sums[0].TraceID + "?span=" + hook)
	p.waitText(`.node-detail dd`, "validating webhook delay.e2e.kelemetry.dev")
	assert.Contains(t, p.text(`.node-detail`), "delay.e2e.kelemetry.dev")
}
