package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kelemetry/kelemetry/frontend/ui"
)

// TestRoutes checks what the UI serves and that it leaves the API, /metrics and /healthz to
// their own handlers.
func TestRoutes(t *testing.T) {
	mux := http.NewServeMux()
	ui.Register(mux)
	mux.HandleFunc("GET /api/services", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "api") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		path, contentType, body string
		code                    int
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="/static/app.js">`, http.StatusOK},
		{"/search?name=demo", "text/html; charset=utf-8", `<main id="app">`, http.StatusOK},
		{"/trace/ff210000006b0c5308001518316dfb35", "text/html; charset=utf-8", `<main id="app">`, http.StatusOK},
		{"/static/app.js", "text/javascript; charset=utf-8", "function route()", http.StatusOK},
		{"/static/app.css", "text/css; charset=utf-8", "--row: 24px", http.StatusOK},
		{"/static/missing.js", "", "", http.StatusNotFound},
		{"/api/services", "", "api", http.StatusOK},
		{"/api/unknown", "", "", http.StatusNotFound},
		{"/healthz", "", "ok", http.StatusOK},
		{"/metrics", "", "metrics", http.StatusOK},
		{"/other", "", "", http.StatusNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.code, resp.StatusCode)
			if tc.contentType != "" {
				assert.Equal(t, tc.contentType, resp.Header.Get("Content-Type"))
				assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
			}
			if tc.path != "/api/services" && tc.path != "/healthz" && tc.path != "/metrics" && tc.code == http.StatusOK {
				assert.Equal(t, ui.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
				assert.NotContains(t, ui.ContentSecurityPolicy, "unsafe-inline", "no inline script or style")
				assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
				assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
				assert.Equal(t, "same-origin", resp.Header.Get("Referrer-Policy"))
			}
			assert.Contains(t, string(body), tc.body)
		})
	}

	resp, err := http.Post(srv.URL+"/", "text/plain", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "pages are GET only")
}
