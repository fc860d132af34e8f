package ui_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend"
	"github.com/kelemetry/kelemetry/frontend/ui"
	"github.com/kelemetry/kelemetry/httpserver"
	"github.com/kelemetry/kelemetry/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// With a token on the API, the UI's pages load, its API calls get 401 and it asks for the
// token; once given, it keeps it for the tab's session and shows results.
func TestBrowserSignIn(t *testing.T) {
	browser := newBrowser(t)
	st := ingestRollout(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("ui-s3cret\n"), 0o600))
	quiet := telemetry.Settings{Logger: slog.New(slog.DiscardHandler)}
	e := frontend.NewEngine(st, 0, frontend.Config{})
	routes := httpserver.HandlerFunc(func(mux *http.ServeMux) {
		query.NewNativeAPI(st, quiet).Register(mux)
		query.NewJaegerAPI(e, quiet).Register(mux)
		query.NewUIAPI(e, quiet).Register(mux)
		ui.Register(mux)
	})
	srv, err := httpserver.New(httpserver.Config{APIAddr: "127.0.0.1:0", APIAuth: httpserver.APIAuthConfig{TokenFiles: []string{tokens}}},
		httpserver.Deps{Logger: quiet.Logger, API: []httpserver.Handler{routes}})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	base := "http://" + srv.APIAddr()

	p := newPage(t, browser)
	p.open(base + "/search?resource=deployments.apps&name=demo&range=custom&start=" + rolloutFrom.Format(time.RFC3339) + "&end=" + rolloutTo.Format(time.RFC3339))
	p.waitJS("the sign-in form", `document.querySelector('#signin form') !== null`)
	assert.Contains(t, p.text(`#signin`), "requires a token")
	assert.NotContains(t, p.text(`#app`), "deployments.apps default/demo", "no data without the token")

	// A wrong token is refused and asked for again.
	p.do(chromedp.SetValue(chromedp.CSS(`#signin input[name=token]`), "wrong"))
	p.click(`#signin button[type=submit]`)
	p.waitText(`#signin`, "was refused")

	p.do(chromedp.SetValue(chromedp.CSS(`#signin input[name=token]`), "ui-s3cret"))
	p.click(`#signin button[type=submit]`)
	results := p.waitText(`.results`, "deployments.apps default/demo")
	assert.Contains(t, results, "1 result")
	var signIn bool
	p.eval(`document.querySelector('#signin') !== null`, &signIn)
	assert.False(t, signIn, "the form is gone")
	var stored string
	p.eval(`sessionStorage.getItem('kelemetry.token')`, &stored)
	assert.Equal(t, "ui-s3cret", stored, "kept for the tab's session")

	// The trace page's API call carries the token too.
	p.click(`a.result`)
	p.waitJS("the trace rows", `document.querySelectorAll('.row').length > 3`)
	p.eval(`document.querySelector('#signin') !== null`, &signIn)
	assert.False(t, signIn)

	// A link to /redirect (the detail panel's "own trace") is resolved with the token.
	p.do(chromedp.Evaluate[chromedp.Void](`(() => { history.replaceState(null, '', '/search'); const a = document.createElement('a');
		a.id = 'redir'; a.textContent = 'own trace';
		a.href = '/redirect?cluster=test&group=apps&resource=deployments&namespace=default&name=demo&time=` + rolloutFrom.Add(40*time.Minute).Format(time.RFC3339) + `';
		document.body.append(a); })()`))
	p.click(`#redir`)
	p.waitJS("the redirect's trace page", `location.pathname.startsWith('/trace/') && document.querySelectorAll('.row').length > 0`)
	p.eval(`document.querySelector('#signin') !== null`, &signIn)
	assert.False(t, signIn)
}
