package ui_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/kelemetry/kelemetry"
	"github.com/kelemetry/kelemetry/audit"
	"github.com/kelemetry/kelemetry/event"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/healthz"
)

// The acceptance path on the real application: kelemetry.Module, wired as the all-in-one is,
// replays the recorded rollout (audit log and Events), and the UI it serves at / shows the
// Deployment with its ReplicaSets and Pods and the controller's status update changing
// status.observedGeneration.
func TestBrowserAllInOne(t *testing.T) {
	browser := newBrowser(t)
	dir := filepath.Join("..", "..", "testdata", "rollout")
	cfg := kelemetry.Config{
		Cluster: "test", AuditAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Audit: audit.Config{Replay: []string{filepath.Join(dir, "audit.jsonl")}},
		Event: event.Config{Replay: []string{filepath.Join(dir, "events-core-v1.json")}},
	}
	var servers *httpserver.Servers
	app := fxtest.New(t, kelemetry.Module, fx.Supply(cfg, slog.New(slog.DiscardHandler)), fx.NopLogger, fx.Populate(&servers))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	base := "http://" + servers.APIAddr()

	require.Eventually(t, func() bool {
		var h healthz.Body
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Replay.Done && h.QueueDepth == 0 && h.LinkJobs == 0
	}, 30*time.Second, 20*time.Millisecond, "the replay ends and its link jobs are done")
	sum := searchOne(t, base, "tracing [full tree]", map[string]string{"resource": "deployments", "name": "demo"}, rolloutFrom, rolloutTo)
	require.Greater(t, sum.Objects, 2, "the Deployment's tree")

	p := newPage(t, browser)
	p.open(base + "/search?resource=deployments.apps&name=demo&" + rolloutRange())
	results := p.waitText(`.results`, "deployments.apps default/demo")
	assert.Contains(t, results, fmt.Sprintf("%d objects", sum.Objects))
	p.click(`a.result`)
	p.waitJS("the trace rows", `document.querySelectorAll('.row').length > 3`)
	rows := p.text(`.row .lbl`)
	assert.Regexp(t, `test deployments\s+demo /`, rows)
	assert.Regexp(t, `replicasets\s+demo-[0-9a-f]+\n`, rows)
	assert.Regexp(t, `pods\s+demo-[0-9a-f]+-[0-9a-z]+`, rows)

	tr := getTrace(t, base, sum.TraceID)
	idx, line := foldedEvent(t, tr, "demo", "deployment-controller update status", "status.observedGeneration")
	p.clickRow("deployments", ".op")
	p.waitText(`.detail .node-title`, "demo")
	p.click(fmt.Sprintf(`.detail tr.event-row:nth-child(%d)`, idx+1))
	p.waitText(`.event-detail .event-title`, "deployment-controller update status")
	old, nw := splitLine(t, line, "status.observedGeneration")
	assert.NotEqual(t, old, nw)
	assert.Equal(t, []string{"status.observedGeneration", old, "→", nw}, p.diffRow("status.observedGeneration"))
}
