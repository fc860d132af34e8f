// Package ui is Kelemetry's built-in web UI: plain HTML, CSS and JavaScript embedded in the
// binary (no build step, no external assets), served next to the frontend's HTTP API.
//
// The pages are a search form with a result list (/, /search), a trace page (/trace/{id}) and
// the cluster's changes (/changes, from GET /api/changes, live with follow=1)
// that draws a result as a collapsible, virtualised timeline of its object tree with event
// markers, event details (diff, snapshot, errors) and in-place display and link mode switches.
// The UI reads GET /api/traces/{id} (frontend.JaegerAPI; an ad-hoc merge of checked search
// results is /trace/{mergeID}), GET /api/ui/search, /api/ui/suggestions and
// /api/critical-path/{id} (frontend.UIAPI), and the object panel's time slider GET
// /api/objects/history, /at and /diff (frontend.NativeAPI); the Jaeger API's GET /redirect lands
// on /trace/{id}.
//
// The trace page also shows the critical path (its steps outlined on the chart, where the time
// went, controllers' reaction times), and a banner when a query budget truncated the result.
// When the API wants a token (401), a sign-in form asks for it and keeps it in the tab's
// sessionStorage. Every response carries contentSecurityPolicy (no inline script or style, no
// framing). Module serves the pages on the API listener; Register mounts them on any mux.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// static holds the pages' files: index.html, app.css, and the ES modules app.js (the entry) and
// js/*.js. The type checker's tsconfig.json next to them is left out.
//
//go:embed static/*.html static/*.css static/*.js static/js/*.js
var static embed.FS

// Register adds the UI's routes to mux: the pages GET /{$}, /search, /trace/{id} and /changes, and the
// assets under GET /static/. It registers no catch-all, so /api/*, /metrics and /healthz stay
// with their own handlers.
func Register(mux *http.ServeMux) {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		// fs.Sub fails only on an invalid path; "static" is a constant.
		return
	}
	assets := http.FileServerFS(sub)
	mux.Handle("GET /static/", http.StripPrefix("/static/", secure(noCache(typed(assets)))))
	page := secure(noCache(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			http.Error(w, "index.html missing from the build", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(data)
	})))
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /search", page)
	mux.Handle("GET /trace/{id}", page)
	mux.Handle("GET /changes", page)
}

// Content types of the assets, fixed so that the host's MIME tables cannot change them (module
// scripts must be served as JavaScript).
var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".html": "text/html; charset=utf-8",
}

func typed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct, ok := contentTypes[path.Ext(r.URL.Path)]; ok {
			w.Header().Set("Content-Type", ct)
		}
		h.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy is the policy of every UI response: scripts, styles and data only from
// the UI's own origin, no inline script or style, no plugins, and no framing by other pages.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// secure adds the security headers of the UI: the content security policy, frame denial for
// browsers without frame-ancestors, no MIME sniffing, and no referrer to other origins.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// noCache makes browsers revalidate, so a new binary's UI is picked up at once.
func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
